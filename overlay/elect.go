package overlay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/classic/pb"
	"github.com/superpeer/superpeer/dhtselect"
)

// Elections (Config.Election). Each cluster runs the election machine of
// package classic named by Config.Election among the members the node
// knows (the membership view's peers whose keys share the cluster prefix).
// Its rank is classic.XORCloseness to the cluster key, so the member it
// elects is the one the DHT lookup of the cluster key ends at. The machines
// talk over "/superpeer/<network>/election/1.0.0": one classic/pb frame per
// stream, whose sender is the stream's authenticated remote peer; a message
// from a peer that is not a member of the cluster is dropped. A send that
// fails is reported to the machine as classic.MsgUnreachable.
//
// How the two mechanisms hand over to each other:
//
//   - The lookup finds the cluster (k, key, members) and, while the election
//     has no leader (a node that has just joined, a cluster whose members
//     changed), it names the superpeer. Not with Quorum: there a cluster
//     without a leader backed by a majority has no superpeer, and its
//     members are the peers seen in the membership view within
//     quorumMemory announce intervals, so that the minority side of a
//     partition cannot make a majority of itself.
//   - Once the election has a leader that is a member, the leader is the
//     superpeer: when a superpeer dies, its members stop hearing its
//     heartbeats and elect the next after one failure-detection timeout,
//     long before routing tables and membership views forget the dead peer.
//   - When the lookup names this node and the election names another for
//     half a failure-detection timeout (a peer closer to the key has
//     joined, or came back), this node campaigns. With bully and the
//     algorithms that elect the highest rank it wins within a few round
//     trips, so the two agree again within one timeout of this node's
//     lookup. Stable and invitation keep a live leader by design: with
//     them the election's answer stands. (Stable's Campaign only confirms
//     a live leader; invitation's makes a follower leave its group, so
//     with invitation the node does not campaign: see handsOver.)
//   - Invitation starts every member as the leader of a group of its own,
//     and every member of a failed leader's group becomes one again. Such
//     a singleton group in a cluster of others names no leader here (see
//     elected): each member would otherwise claim to be the superpeer at
//     once, claims that no other member follows, until the groups merge.
//     Meanwhile the lookup's answer stands, as for any election without a
//     leader. And a change of members (a peer joins, or leaves the
//     membership view) reconfigures the invitation machine rather than
//     rebuilding it (classic.Reconfigurer), so that its group survives.
//
// Timeouts are measured in RTTs: a machine ticks every ElectionTick, its
// leader beats every heartbeatTicks ticks, and a follower waits three
// heartbeats plus four of the largest RTT to a member (libp2p's latency
// estimate, at most maxRTT) before it acts: 1.5 s plus 4 RTTs with the
// default tick of 100 ms.

// heartbeatTicks is the leader's heartbeat period in election ticks.
const heartbeatTicks = 5

type elector struct {
	n     *Node
	name  string
	opts  classic.Options
	proto protocol.ID
	rng   *rand.Rand

	mu      sync.Mutex
	k       int
	key     dhtselect.Key
	peers   []peer.ID
	m       classic.Machine // nil until the first cluster is known
	state   classic.State
	timeout int // TimeoutTicks of m
	hard    map[dhtselect.Key]classic.HardState
	differ  int                        // ticks the lookup has named us while the election named another
	orphan  int                        // ticks without a leader
	carried int                        // ticks that e.state.Leader, from the machine before the last rebuild, still stands
	lookup  peer.ID                    // the lookup's last answer
	losses  []loss                     // lost connections to members, within flapWindow
	outages []time.Time                // when this node lost all its connections, within flapWindow
	demoted map[peer.ID]bool           // flapping and private members, ranked last (host quality)
	first   peer.ID                    // ranked first: the geometric cluster's token holder
	last    peer.ID                    // the last leader superpeer named
	sent    map[classic.MsgType]uint64 // messages sent, by type
	dropped uint64                     // messages received from non-members or malformed

	events chan any // EvtSuperpeerElected and EvtSuperpeerLost for emitLoop
}

// electionProtocol is the election's stream protocol on a network.
func electionProtocol(network string) protocol.ID {
	return protocol.ID("/superpeer/" + network + "/election/1.0.0")
}

func (n *Node) startElector(ctx context.Context) {
	h := fnv.New64a()
	h.Write([]byte(n.self))
	seed := h.Sum64()
	e := &elector{
		n: n, name: n.cfg.Election, opts: classic.Options{Quorum: n.cfg.Quorum},
		proto:  electionProtocol(n.cfg.Network),
		rng:    rand.New(rand.NewPCG(seed, seed>>1)),
		hard:   map[dhtselect.Key]classic.HardState{},
		sent:   map[classic.MsgType]uint64{},
		events: make(chan any, electionEvents),
	}
	n.host.SetStreamHandler(e.proto, e.handle)
	n.elect = e
	n.wg.Add(2)
	go e.loop(ctx)
	go e.emitLoop(ctx)
}

func (e *elector) close() { e.n.host.RemoveStreamHandler(e.proto) }

// loop ticks the machine every ElectionTick.
func (e *elector) loop(ctx context.Context) {
	defer e.n.wg.Done()
	t := time.NewTicker(e.n.cfg.ElectionTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.mu.Lock()
		if e.m == nil {
			e.mu.Unlock()
			continue
		}
		e.m.Tick()
		if e.carried > 0 {
			e.carried-- // at 0, drainLocked drops the carried leader
		}
		// A machine without a leader for two timeouts campaigns: echo has
		// no failure detector of its own (the driver is its detector, as in
		// the simulator's property tests), and an election whose messages
		// were lost starts again. And the hand-over rule (see the top of
		// this file): the lookup names us, the election another.
		leader := e.state.Leader
		orphaned := overdue(&e.orphan, leader == classic.None, 2*e.timeout)
		passedOver := overdue(&e.differ, handsOver(e.name) && e.lookup == e.n.self && !e.demoted[e.n.self] && leader != classic.None && leader != classic.ID(e.n.self), e.timeout/2)
		if orphaned || passedOver {
			e.m.Campaign()
		}
		e.drainLocked(ctx)
		e.mu.Unlock()
	}
}

// overdue counts *ticks up while cond holds (and resets it when not), and
// reports, resetting it, when the count passes limit.
func overdue(ticks *int, cond bool, limit int) bool {
	if !cond {
		*ticks = 0
		return false
	}
	*ticks++
	if *ticks <= limit {
		return false
	}
	*ticks = 0
	return true
}

// handsOver reports whether the named election campaigns when the lookup
// names this node and the election another (see the top of this file).
// Invitation does not: its Campaign makes a follower of a live leader
// leave the group and lead a singleton, and its merges do not favour the
// rank anyway, so the node would leave its group every half timeout.
func handsOver(election string) bool { return election != "invitation" }

// elected is the state st of machine m as the node takes it, in a cluster
// of size members: an invitation machine that leads a group of only itself
// while the cluster has other members has been elected by no one, and
// names no leader (Role Candidate: its invitation rounds are its
// election). The leader of a one-member cluster is elected.
func elected(m classic.Machine, st classic.State, self classic.ID, size int) classic.State {
	iv, ok := m.(*classic.Invitation)
	if ok && size > 1 && st.Leader == self && len(iv.Members()) == 1 {
		return classic.State{Role: classic.Candidate, Term: st.Term}
	}
	return st
}

// drainLocked sends the machine's messages and takes note of its state;
// called with e.mu held. A change of leader makes the node re-evaluate.
func (e *elector) drainLocked(ctx context.Context) {
	rd := e.m.Ready()
	rd.State = elected(e.m, rd.State, classic.ID(e.n.self), len(e.peers))
	if e.carried > 0 && rd.State.Leader == classic.None {
		// A rebuilt machine that names no leader yet: the carried one
		// stands (see rebuildLocked).
		rd.State = classic.State{Role: rd.State.Role, Leader: e.state.Leader, Term: e.state.Term}
	} else {
		e.carried = 0
	}
	changed := rd.State.Leader != e.state.Leader
	if changed && e.state.Leader != classic.None {
		e.queue(EvtSuperpeerLost{Superpeer: peer.ID(e.state.Leader)})
	}
	if changed && rd.State.Leader != classic.None {
		e.queue(EvtSuperpeerElected{Superpeer: peer.ID(rd.State.Leader), Term: rd.State.Term})
	}
	e.state = rd.State
	for _, m := range rd.Messages {
		e.sent[m.Type]++
		e.send(ctx, m)
	}
	if changed {
		e.n.log.Info("election", "algorithm", e.name, "leader", peer.ID(rd.State.Leader), "role", rd.State.Role, "term", rd.State.Term)
		e.n.Reevaluate()
	}
}

// queue hands an event to the emitter goroutine without blocking (called
// with e.mu held; a subscriber that does not read holds up only the
// emitter, and events beyond electionEvents pending are dropped with a
// warning).
func (e *elector) queue(evt any) {
	select {
	case e.events <- evt:
	default:
		e.n.log.Warn("election: event dropped, subscribers are not reading", "event", fmt.Sprintf("%T", evt))
	}
}

// emitLoop emits the queued events in order.
func (e *elector) emitLoop(ctx context.Context) {
	defer e.n.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case evt := <-e.events:
			switch evt.(type) {
			case EvtSuperpeerElected:
				e.n.emit(e.n.emitElected, evt)
			case EvtSuperpeerLost:
				e.n.emit(e.n.emitLost, evt)
			}
		}
	}
}

// electionEvents is how many events may wait for the emitter.
const electionEvents = 256

// send delivers m in the background (called with e.mu held, so it must not
// wait); a failure comes back to the machine as MsgUnreachable. Each
// message lives at most one deadline, so the goroutines in flight are
// bounded by the message rate.
func (e *elector) send(ctx context.Context, m classic.Message) {
	to := peer.ID(m.To)
	if to == e.n.self {
		return
	}
	machine, deadline := e.m, e.deadlineLocked()
	go func() {
		err := e.write(ctx, to, m, deadline)
		if err == nil || ctx.Err() != nil {
			return
		}
		e.n.log.Debug("election: send", "to", to, "type", m.Type, "err", err)
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.m != machine { // rebuilt meanwhile: the notice is for another cluster
			return
		}
		e.m.Step(classic.Message{Type: classic.MsgUnreachable, From: m.To, To: classic.ID(e.n.self)})
		e.drainLocked(ctx)
	}()
}

func (e *elector) write(ctx context.Context, to peer.ID, m classic.Message, deadline time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	s, err := e.n.host.NewStream(ctx, to, e.proto)
	if err != nil {
		return err
	}
	if err := inService(s); err != nil {
		_ = s.Reset()
		return err
	}
	_ = s.SetDeadline(time.Now().Add(deadline))
	if err := pb.WriteMsg(s, m); err != nil {
		_ = s.Reset()
		return err
	}
	return s.Close()
}

// deadline bounds one election message: the failure-detection timeout,
// so that an unreachable member is reported before the machine gives up.
func (e *elector) deadline() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.deadlineLocked()
}

func (e *elector) deadlineLocked() time.Duration {
	return time.Duration(max(e.timeout, 3*heartbeatTicks)) * e.n.cfg.ElectionTick
}

// handle reads one election message. The sender is the stream's remote
// peer; a message from outside the cluster, or one that does not decode,
// is dropped.
func (e *elector) handle(s network.Stream) {
	defer s.Close()
	from := s.Conn().RemotePeer()
	if err := e.n.admit(s); err != nil {
		_ = s.Reset()
		e.n.guard.refuse(e.n, "election", from, err)
		return
	}
	_ = s.SetDeadline(time.Now().Add(e.deadline()))
	m, err := pb.ReadMsg(s, classic.ID(from))
	if errors.Is(err, io.EOF) {
		// Nothing sent: the sender closed the stream without a message.
		err = fmt.Errorf("%w: no message", errTruncated)
	}
	if err != nil {
		_ = s.Reset()
		e.n.guard.refuse(e.n, "election", from, err)
		e.mu.Lock()
		e.dropped++
		e.mu.Unlock()
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil || !slices.Contains(e.peers, from) || m.Type == classic.MsgUnreachable {
		e.dropped++
		return
	}
	m.To = classic.ID(e.n.self)
	e.m.Step(m)
	e.drainLocked(context.Background())
}

// superpeer brings the machine up to date with the cluster the selector
// found and returns the superpeer: the election's leader when it has one
// among the members, else the selector's answer (lookup); with Quorum,
// none: a peer that cannot reach a majority has no superpeer rather than
// one that the other side of a partition may not know of. first, when not
// empty, ranks above every member (the geometric strategy's token holder).
func (e *elector) superpeer(ctx context.Context, k int, key dhtselect.Key, members []peer.ID, lookup, first peer.ID) (peer.ID, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lookup = lookup
	demoted := e.n.unreachable(members)
	if !e.n.cfg.IgnoreFlaps {
		maps.Copy(demoted, e.flapping(time.Now()))
	}
	if e.m == nil || k != e.k || key != e.key || !slices.Equal(members, e.peers) || !maps.Equal(demoted, e.demoted) || first != e.first {
		if len(demoted) > 0 || len(e.demoted) > 0 {
			e.n.log.Info("election: host quality", "ranked last", fmt.Sprint(slices.Sorted(maps.Keys(demoted))))
		}
		e.demoted, e.first = demoted, first
		if !e.reconfigureLocked(ctx, k, key, members) {
			if err := e.rebuildLocked(ctx, k, key, members); err != nil {
				return "", err
			}
		}
	}
	if l := peer.ID(e.state.Leader); l != "" && slices.Contains(e.peers, l) {
		e.last = l
		return l, nil
	}
	if e.opts.Quorum {
		return "", nil
	}
	if e.demoted[lookup] && e.last != "" && e.last != lookup && slices.Contains(e.peers, e.last) {
		// The lookup names a flapping member (the closest to the key):
		// while the election runs, the last leader stands instead, or
		// every election the flapping node starts when it comes back
		// would name it superpeer meanwhile.
		return e.last, nil
	}
	return lookup, nil
}

// rebuildLocked builds a machine for a new cluster or member set. A fresh
// machine knows no leader; it learns it from the leader's next heartbeat.
// The node campaigns at once when it led before (to re-assert itself to
// the new set) and when it has just joined and the lookup names it (a
// process that recovers campaigns, as in bully); otherwise it waits like
// any follower. A joining node whose lookup names another does not
// campaign: its membership view is still filling, and with the true
// leader missing from it, it would win an election it should lose (seen
// with node processes joining a churning network: two claims of one
// cluster for 8 s each time).
func (e *elector) rebuildLocked(ctx context.Context, k int, key dhtselect.Key, members []peer.ID) error {
	first, oldKey := e.m == nil, e.key
	led := e.state.Role == classic.Leader || e.state.Leader == classic.ID(e.n.self)
	oldQ, _ := e.m.(*classic.Quorum)
	if oldQ != nil {
		e.hard[e.key] = oldQ.HardState()
	}
	cfg := e.configLocked(key, members)
	cfg.Rand = rand.New(rand.NewPCG(e.rng.Uint64(), e.rng.Uint64()))
	ids, timeout := cfg.Peers, cfg.TimeoutTicks
	opts := e.opts
	opts.HardState = e.hard[key]
	m, err := classic.New(e.name, cfg, opts)
	if err != nil {
		return fmt.Errorf("election: %w", err)
	}
	e.m, e.k, e.key, e.peers, e.timeout = m, k, key, slices.Clone(members), timeout
	// The new machine knows no leader yet. The old one's leader, if it is
	// still a member, stands until the new machine names one (its next
	// heartbeat usually), so that a change of members is not reported as
	// a lost superpeer; one that is no longer a member is lost. It stands
	// one failure-detection timeout at most, and with Quorum this node
	// stands as leader no longer than the lease its old machine held: the
	// new machine may never name it (the minority side of a partition),
	// and a leader carried on for longer would be a split brain.
	e.differ, e.orphan = 0, 0
	l := e.state.Leader
	carry := 0
	if l != classic.None && slices.Contains(ids, l) && oldKey == key {
		carry = e.timeout
		if oldQ != nil && l == classic.ID(e.n.self) {
			carry = oldQ.LeaseLeft()
		}
	}
	if carry > 0 {
		e.state, e.carried = classic.State{Leader: l, Term: e.state.Term}, carry
	} else {
		if l != classic.None {
			e.queue(EvtSuperpeerLost{Superpeer: peer.ID(l)})
		}
		e.state, e.carried = classic.State{}, 0
	}
	if first && e.lookup == e.n.self || led {
		e.m.Campaign()
	}
	e.drainLocked(ctx)
	return nil
}

// configLocked is the machine configuration for the cluster key and
// members, Rand left nil. Called with e.mu held.
func (e *elector) configLocked(key dhtselect.Key, members []peer.ID) classic.Config {
	ids := make([]classic.ID, len(members))
	for i, p := range members {
		ids[i] = classic.ID(p)
	}
	return classic.Config{
		ID: classic.ID(e.n.self), Peers: ids,
		Rank:           rank{inner: classic.XORCloseness{Target: key[:]}, first: e.first, demoted: e.demoted},
		HeartbeatTicks: heartbeatTicks, TimeoutTicks: e.timeoutTicks(members),
	}
}

// reconfigureLocked gives a machine that implements classic.Reconfigurer
// the new members (and rank) of the same cluster, and reports whether it
// did; otherwise (another cluster, another algorithm, an error) the
// caller rebuilds the machine. The machine keeps its leader or group, so
// a change of members is no election. Called with e.mu held.
func (e *elector) reconfigureLocked(ctx context.Context, k int, key dhtselect.Key, members []peer.ID) bool {
	r, ok := e.m.(classic.Reconfigurer)
	if !ok || k != e.k || key != e.key {
		return false
	}
	cfg := e.configLocked(key, members) // Rand nil: the machine keeps its own
	if err := r.Reconfigure(cfg); err != nil {
		e.n.log.Warn("election: reconfigure", "err", err)
		return false
	}
	e.peers, e.timeout = slices.Clone(members), cfg.TimeoutTicks
	e.differ, e.orphan = 0, 0
	e.drainLocked(ctx)
	return true
}

// maxRTT caps the RTT estimates the timeout is made of: libp2p's latency
// estimates on a loaded host include its scheduling delays (about 2 s on
// 64 in-process nodes sharing two cores), which would stretch the timeout
// to ten seconds.
const maxRTT = time.Second

// timeoutTicks is the failure-detection timeout for a cluster: three
// heartbeats plus four of the largest RTT to a member that libp2p has
// measured (at most maxRTT), in ticks.
func (e *elector) timeoutTicks(members []peer.ID) int {
	var rtt time.Duration
	for _, p := range members {
		if p != e.n.self {
			rtt = max(rtt, min(e.n.host.Peerstore().LatencyEWMA(p), maxRTT))
		}
	}
	tick := e.n.cfg.ElectionTick
	return 3*heartbeatTicks + int((4*rtt+tick-1)/tick)
}

// Host quality: a member that flaps (goes down and comes back) ranks last
// while it has lost its connections flapLimit times within flapWindow.
// Every member sees the same losses of the flapping node, so they agree on
// its rank. The flapping node itself sees every peer go: when it has no
// connection left, that is an outage of its own, and the losses of the
// ownOutage before it are not counted against the others; so it ranks
// itself last too.
const (
	flapLimit  = 2
	flapWindow = time.Minute
	ownOutage  = 5 * time.Second
)

// loss is a lost connection to a member.
type loss struct {
	p  peer.ID
	at time.Time
}

// flapping returns the members that lost their connections flapLimit
// times within flapWindow before now, this node among them when it lost
// all its connections flapLimit times. Called with e.mu held.
func (e *elector) flapping(now time.Time) map[peer.ID]bool {
	old := func(t time.Time) bool { return now.Sub(t) > flapWindow }
	e.losses = slices.DeleteFunc(e.losses, func(l loss) bool { return old(l.at) })
	e.outages = slices.DeleteFunc(e.outages, old)
	count := map[peer.ID]int{e.n.self: len(e.outages)}
	for _, l := range e.losses {
		count[l.p]++
	}
	out := map[peer.ID]bool{}
	for p, c := range count {
		if c >= flapLimit {
			out[p] = true
		}
	}
	return out
}

// rank ranks first (the geometric cluster's token holder, if any) above
// all, the demoted members below all others, and otherwise as inner does.
type rank struct {
	inner   classic.Rank
	first   peer.ID
	demoted map[peer.ID]bool
}

func (r rank) Compare(a, b classic.ID) int {
	return cmp.Or(cmp.Compare(r.class(a), r.class(b)), r.inner.Compare(a, b))
}

// class is 1 for first, -1 for a demoted member, 0 for the others.
func (r rank) class(x classic.ID) int {
	switch {
	case r.first != "" && peer.ID(x) == r.first:
		return 1
	case r.demoted[peer.ID(x)]:
		return -1
	}
	return 0
}

// detection is the current failure-detection timeout (0 on a nil elector
// or before the first cluster).
func (e *elector) detection() time.Duration {
	if e == nil {
		return 0
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return time.Duration(e.timeout) * e.n.cfg.ElectionTick
}

// leaderOf returns the election's leader when the machine runs for the
// cluster whose first-ranked member is first (the geometric strategy's
// token holder), and "" otherwise. Safe on a nil elector.
func (e *elector) leaderOf(first peer.ID) peer.ID {
	if e == nil {
		return ""
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil || e.first != first {
		return ""
	}
	return peer.ID(e.state.Leader)
}

// lost is told that the last connection to p closed. It notes the loss of a
// member for host quality. When p is the leader the machine campaigns at
// once: a failure notice that echo, which has no heartbeats of its own,
// needs, and that saves the others a timeout.
func (e *elector) lost(p peer.ID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil || p == e.n.self {
		return
	}
	now := time.Now()
	switch {
	case len(e.n.host.Network().Peers()) == 0:
		// Our own outage, not theirs: once per outage.
		if len(e.outages) == 0 || now.Sub(e.outages[len(e.outages)-1]) > ownOutage {
			e.outages = append(e.outages, now)
		}
		e.losses = slices.DeleteFunc(e.losses, func(l loss) bool { return now.Sub(l.at) <= ownOutage })
	case slices.Contains(e.peers, p):
		e.losses = append(e.losses, loss{p, now})
	}
	if peer.ID(e.state.Leader) != p {
		return
	}
	e.n.log.Info("election: lost the connection to the leader", "leader", p)
	e.m.Campaign()
	e.drainLocked(context.Background())
}

// ElectionStats are a node's election counters.
type ElectionStats struct {
	// Algorithm is Config.Election; empty when the node runs none.
	Algorithm string
	// Lookup is the DHT lookup's last answer for the cluster key, which the
	// election's Leader should agree with (see elect.go).
	Lookup peer.ID
	// Leader, Role and Term are the machine's current state.
	Leader peer.ID
	Role   string
	Term   uint64
	// Timeout is the current failure-detection timeout.
	Timeout time.Duration
	// Sent counts the messages sent, by type name.
	Sent map[string]uint64
	// Dropped counts messages received from non-members or malformed.
	Dropped uint64
}

// ElectionStats returns the node's election counters (zero when it runs
// no election).
func (n *Node) ElectionStats() ElectionStats {
	e := n.elect
	if e == nil {
		return ElectionStats{}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	st := ElectionStats{
		Algorithm: e.name, Lookup: e.lookup, Leader: peer.ID(e.state.Leader), Role: e.state.Role.String(), Term: e.state.Term,
		Timeout: time.Duration(e.timeout) * e.n.cfg.ElectionTick, Sent: map[string]uint64{}, Dropped: e.dropped,
	}
	for t, c := range e.sent {
		st.Sent[t.String()] = c
	}
	return st
}
