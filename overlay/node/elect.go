package node

import (
	"cmp"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/dhtselect"
)

// Elections (Config.Election). Each cluster runs the election machine of
// package classic named by Config.Election among the members the node
// knows (the membership view's peers whose keys share the cluster prefix).
// Its rank is classic.XORCloseness to the cluster key, so the member it
// elects is the one the DHT lookup of the cluster key ends at. A message
// from a peer that is not a member of the cluster is dropped, but for a
// ring election of a member passed on by a peer of the cluster (relayer).
// A send that
// fails comes back as SendFailed and is given to the machine as
// classic.MsgUnreachable.
//
// How the two mechanisms hand over to each other:
//
//   - The lookup finds the cluster (k, key, members) and, while the election
//     has no leader (a node that has just joined, a cluster whose members
//     changed), it names the superpeer, unless it names a member that
//     flaps, or, for one failure-detection timeout, a peer the node's view
//     does not hold, while the last leader is still a member (see
//     superpeer and stranger): then the last leader stands. Not with
//     Quorum: there a cluster without a leader backed by a majority has
//     no superpeer, and its members are the peers seen in the membership
//     view within quorumMemory announce intervals, so that the minority
//     side of a partition cannot make a majority of itself.
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
// Floods: a member that sends more than its algorithm allows an honest
// one (a bully member's ELECTIONs beyond a handful a timeout) is named by
// the machine (classic.Ready.Flooders); the node hands it to the driver
// (Ready.Flooders, counted in ElectionStatus.Flooded), which strikes it
// as a peer whose message its guard refused, so that the flooder, not
// the peer it made react, is banned. The node's own reactions stay under
// the peers' limits besides (sendRate).
//
// Timeouts are measured in RTTs: a machine ticks every ElectionTick, its
// leader beats every HeartbeatTicks ticks, and a follower waits three
// heartbeats plus four of the largest RTT to a member (the view's RTT, at
// most MaxRTT) before it acts: 1.5 s plus 4 RTTs with the default tick of
// 100 ms.

// HeartbeatTicks is the leader's heartbeat period in election ticks.
const HeartbeatTicks = 5

// MaxRTT caps the RTT estimates the timeout is made of: libp2p's latency
// estimates on a loaded host include its scheduling delays (about 2 s on
// 64 in-process nodes sharing two cores), which would stretch the timeout
// to ten seconds.
const MaxRTT = time.Second

// TimeoutTicks is the failure-detection timeout for a cluster whose
// largest RTT to a member is rtt: three heartbeats plus four RTTs (rtt at
// most MaxRTT), in ticks of tick.
func TimeoutTicks(rtt, tick time.Duration) int {
	rtt = min(rtt, MaxRTT)
	return 3*HeartbeatTicks + int((4*rtt+tick-1)/tick)
}

// ringTicks is the timeout a ring of n members needs: two turns of the
// ring (2·n one-way delays of rtt/2, at most MaxRTT each) plus two
// heartbeats, in ticks of tick.
func ringTicks(n int, rtt, tick time.Duration) int {
	rtt = min(rtt, MaxRTT)
	return 2*HeartbeatTicks + int((time.Duration(n)*rtt+tick-1)/tick)
}

// Host quality: a member that flaps (goes down and comes back) ranks last
// while it has lost all its connections flapLimit times within
// flapWindow. Only the flapping node itself can tell: when it has no
// connection left, that is an outage of its own, and a restart is one too
// (persisted: Config.Outages). So it ranks itself last, and says so in its
// announcement (Announcement.Flapping), which makes every member rank it
// last as well. A rank the members disagree on is two leaders (found by
// the node simulator: a node that crashed and came back twice ranked
// itself first, its mates last, and both sides claimed the cluster). The
// members do not count their own lost connections to a peer against it:
// a partition cuts each side off from the other, each side would rank the
// other last, and the two sides of a cluster would disagree on its rank
// after the heal (found live: with --quorum, a 20 s partition of 16 node
// processes left a cluster with two bully leaders that each took the
// other's COORDINATOR for a lower process's and bullied back, until the
// storm of messages got the rightful leader banned).
const (
	flapLimit  = 2
	flapWindow = time.Minute
	ownOutage  = 5 * time.Second
)

type elector struct {
	// First what every tick, idle count, message and Ready reads, in the
	// first cache lines (see Machine).
	m           *Machine
	nextTick    time.Time
	period      time.Duration
	mach        classic.Machine // nil until the first cluster is known
	peers       []peer.ID       // the members (step looks every message's sender up in them)
	state       classic.State
	timeout     int  // TimeoutTicks of mach
	differ      int  // ticks the lookup has named us while the election named another
	orphan      int  // ticks without a leader
	carried     int  // ticks that state.Leader, from the machine before the last rebuild, still stands
	selfDemoted bool // demoted[self]
	hardOut     bool // hard changed since the last Ready
	outOut      bool // outages changed since the last Ready
	unconfirmed bool // state.Leader is the lookup's answer carried, which no machine has elected yet
	self        peer.ID
	lookup      peer.ID // the lookup's last answer
	first       peer.ID // ranked first: the geometric cluster's token holder
	name        string
	out         []Outgoing
	events      []ElectionEvent
	flooders    []peer.ID // the members caught at it since the last Ready

	opts         classic.Options
	rng          *rand.Rand
	k            int
	key          dhtselect.Key
	target       dhtselect.Key // the rank's: key, or its salted target (epoch.go)
	gen          uint64        // incremented with every new machine
	hard         map[dhtselect.Key]classic.HardState
	outages      []time.Time                // when this node lost all its connections, within flapWindow
	demoted      map[peer.ID]bool           // flapping and private members, ranked last (host quality)
	selfFlapping bool                       // this node is among them for its own outages
	leaderLost   bool                       // the machine lost its leader and has found none since
	cutOff       peer.ID                    // the last leader whose connection was lost, until it is heard from again
	last         peer.ID                    // the last leader superpeer named
	between      time.Time                  // when superpeer first found no leader since it last named one (zero: it named one)
	geoSP        peer.ID                    // superpeer's answer for the last GeoCluster
	sent         map[classic.MsgType]uint64 // messages sent, by type
	dropped      uint64                     // messages received from non-members
	budget       map[peer.ID]*bucket        // what each peer may still be sent (sendRate)
	throttled    uint64                     // messages not sent for want of budget
	flooded      uint64                     // members' messages over the machine's allowance (classic.Ready.Flooders)
}

func newElector(m *Machine, cfg Config) *elector {
	h := fnv.New64a()
	h.Write([]byte(cfg.Self))
	seed := h.Sum64()
	e := &elector{
		m: m, name: cfg.Election, opts: classic.Options{Quorum: cfg.Quorum}, self: cfg.Self, period: cfg.ElectionTick,
		rng:    rand.New(rand.NewPCG(seed, seed>>1)),
		hard:   map[dhtselect.Key]classic.HardState{},
		sent:   map[classic.MsgType]uint64{},
		budget: map[peer.ID]*bucket{},
	}
	maps.Copy(e.hard, cfg.HardState)
	e.outages = slices.Clone(cfg.Outages)
	return e
}

// take returns and clears the messages, events, and the hard state and
// outages to persist.
func (e *elector) take() ([]Outgoing, []ElectionEvent, map[dhtselect.Key]classic.HardState, []time.Time) {
	out, events := e.out, e.events
	e.out, e.events = nil, nil
	var hs map[dhtselect.Key]classic.HardState
	if e.hardOut {
		hs, e.hardOut = maps.Clone(e.hard), false
	}
	var outages []time.Time
	if e.outOut {
		outages, e.outOut = append([]time.Time{}, e.outages...), false
	}
	return out, events, hs, outages
}

// takeFlooders returns and clears the members the machine caught over
// their allowance since the last Ready.
func (e *elector) takeFlooders() []peer.ID {
	f := e.flooders
	e.flooders = nil
	return f
}

// outage notes an outage of this node's own at now: at most one per
// ownOutage.
func (e *elector) outage(now time.Time) {
	if len(e.outages) > 0 && now.Sub(e.outages[len(e.outages)-1]) <= ownOutage {
		return
	}
	e.outages = append(slices.DeleteFunc(e.outages, func(t time.Time) bool { return now.Sub(t) > flapWindow }), now)
	e.outOut = true
}

// tick ticks the machine when an election tick is due. A late tick is not
// made up for (as time.Ticker drops ticks).
func (e *elector) tick(now time.Time) {
	if now.Before(e.nextTick) {
		return
	}
	if e.nextTick = e.nextTick.Add(e.period); !e.nextTick.After(now) {
		e.nextTick = now.Add(e.period)
	}
	if e.mach == nil {
		return
	}
	e.mach.Tick()
	if e.carried > 0 {
		e.carried-- // at 0, drain drops the carried leader
	}
	if e.hushed() {
		e.orphan, e.differ = 0, 0
		e.drain()
		return
	}
	// A machine without a leader for two timeouts campaigns: echo has no
	// failure detector of its own (the node is its detector), and an
	// election whose messages were lost starts again. And the hand-over
	// rule (see the top of this file): the lookup names us, the election
	// another.
	orphaned := overdue(&e.orphan, e.orphaned(), 2*e.timeout)
	passedOver := overdue(&e.differ, e.passedOver(), e.timeout/2)
	if orphaned || passedOver {
		e.mach.Campaign()
	}
	e.drain()
}

// idle is how many of the next election ticks, with no input in
// between, only move counters: the machine's (classic.Idler: a machine
// that is not one is ticked every tick), the carried leader's, and the
// orphan and hand-over counts of tick. Many without a machine.
func (e *elector) idle() int {
	if e.mach == nil {
		return math.MaxInt
	}
	im, ok := e.mach.(classic.Idler)
	if !ok {
		return 0
	}
	n := im.Idle()
	if e.carried > 0 {
		n = min(n, e.carried-1) // at 0, drain drops the carried leader
	}
	if e.hushed() {
		return max(n, 0)
	}
	if e.orphaned() {
		n = min(n, 2*e.timeout-e.orphan)
	}
	if e.passedOver() {
		n = min(n, e.timeout/2-e.differ)
	}
	return max(n, 0)
}

// hushed reports whether this node ranks itself last (it flaps, or is
// private) below a mate that does not: it cannot win their election while
// that mate lives, so its machine is passive (classic.Passive: its clock
// and failure detector run, it relays and votes, but it is never its own
// leader and puts itself forward in no election) and it does not campaign
// when it has had no leader for a while (tick); it follows the leader the
// others elect, whose heartbeat or COORDINATOR reaches it. Campaigning,
// it won with no OK when the mates whose views did not yet hold it after
// its outage dropped its ELECTION, and its COORDINATOR took the one mate
// that did hold it, the cluster's superpeer, from the cluster for a
// timeout (live, in virtual time: TestFlapScenario's third win, 3 runs in
// 40 under load). Alone in
// its view, or among mates that all rank last too (a swarm restarted
// twice, a cluster of private nodes), it is not hushed: the election
// ranks them as usual. Nor with a machine that cannot be passive:
// Quorum's, which cannot win without a majority's votes (mates that do
// not hold it refuse them), and invitation's. A hushed machine used not
// to be ticked at all, and its stopped clock broke every rule that counts
// time: with a private member, bully, next-in-line, candidate and stable
// clusters did not fail over, or the private member did not follow the
// new leader, until the dead leader left the views; quorum clusters never
// did (TestFailsOverWithPrivateMate).
func (e *elector) hushed() bool {
	if !e.selfDemoted {
		return false // (the cheap test first: most nodes are not demoted)
	}
	if _, ok := e.mach.(classic.Passive); !ok || e.first == e.self || e.state.Leader == classic.ID(e.self) {
		return false
	}
	return slices.ContainsFunc(e.peers, func(p peer.ID) bool { return p != e.self && !e.demoted[p] })
}

// hush makes the machine passive while this node is hushed, and active
// again when it no longer is: called before the machine's next input
// (drain, after each, and rebuild).
func (e *elector) hush() {
	if p, ok := e.mach.(classic.Passive); ok {
		p.SetPassive(e.hushed())
	}
}

// orphaned and passedOver are tick's conditions for campaigning, which
// its counts run while they hold (see tick).
func (e *elector) orphaned() bool { return e.state.Leader == classic.None }

func (e *elector) passedOver() bool {
	leader := e.state.Leader
	return handsOver(e.name) && e.lookup == e.self && !e.selfDemoted && leader != classic.None && leader != classic.ID(e.self)
}

// skip makes n election ticks at once, the last at last, where idle
// counts them idle: as many calls of tick would, the outage of a late
// tick aside (the driver's ticks are on time).
func (e *elector) skip(n int, last time.Time) {
	e.nextTick = last.Add(e.period)
	if e.mach == nil {
		return
	}
	e.mach.(classic.Idler).Skip(n)
	if e.carried > 0 {
		e.carried -= n
	}
	if e.hushed() {
		e.orphan, e.differ = 0, 0
		return
	}
	e.orphan = counted(e.orphan, e.orphaned(), n)
	e.differ = counted(e.differ, e.passedOver(), n)
}

// counted is overdue's count after n ticks that do not reach its limit.
func counted(ticks int, cond bool, n int) int {
	if !cond {
		return 0
	}
	return ticks + n
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

// drain takes the machine's messages and state. A change of leader makes
// the node re-evaluate at once, from its last lookup (see kicked).
func (e *elector) drain() {
	rd := e.mach.Ready()
	rd.State = elected(e.mach, rd.State, classic.ID(e.self), len(e.peers))
	// The machine elects the lookup's answer that stood meanwhile: that
	// is the election's news, though the leader named does not change
	// (without it the members reported losing their superpeer, and never
	// electing the successor).
	confirmed := e.unconfirmed && rd.State.Leader != classic.None && rd.State.Leader == e.state.Leader
	if rd.State.Leader != classic.None && rd.State.Leader != e.state.Leader || confirmed {
		e.unconfirmed = false
	}
	if confirmed {
		e.events = append(e.events, ElectionEvent{Superpeer: peer.ID(rd.State.Leader), Term: rd.State.Term})
	}
	if e.carried > 0 && (rd.State.Leader == classic.None || e.outranks(e.state.Leader, rd.State.Leader)) {
		// A rebuilt machine that names no leader yet, or one ranked below
		// the carried leader: the carried one stands (see rebuild) until
		// the machine hears from it or the carry runs out. A fresh machine
		// follows the first member that announces itself, and a member
		// that announces itself to every peer below it (issue 19's
		// hostile member) would hold each member whose machine was just
		// rebuilt until the leader's next heartbeat (found by the node
		// simulator with the cluster-scoped membership, where a dead
		// superpeer leaves the members' views at other times than the
		// new superpeer's).
		rd.State = classic.State{Role: rd.State.Role, Leader: e.state.Leader, Term: e.state.Term}
	} else {
		e.carried = 0
	}
	changed := rd.State.Leader != e.state.Leader
	if changed {
		// Whether the machine lost the leader it had, and has not found
		// another yet (see rebuild).
		e.leaderLost = rd.State.Leader == classic.None && e.state.Leader != classic.None
	}
	if changed && e.state.Leader != classic.None {
		e.events = append(e.events, ElectionEvent{Lost: true, Superpeer: peer.ID(e.state.Leader)})
	}
	if changed && rd.State.Leader != classic.None {
		e.events = append(e.events, ElectionEvent{Superpeer: peer.ID(rd.State.Leader), Term: rd.State.Term})
	}
	e.state = rd.State
	for _, id := range rd.Flooders {
		e.flooded++
		if p := peer.ID(id); !slices.Contains(e.flooders, p) {
			e.flooders = append(e.flooders, p)
		}
	}
	if q, ok := e.mach.(*classic.Quorum); ok {
		// Stored before the messages that depend on it leave: Ready
		// carries it, and the driver syncs it first.
		if hs := q.HardState(); hs != e.hard[e.key] {
			e.hard[e.key], e.hardOut = hs, true
		}
	}
	deadline := e.deadline()
	e.out = slices.Grow(e.out, len(rd.Messages))
	for _, msg := range rd.Messages {
		to := peer.ID(msg.To)
		if to == e.self {
			continue
		}
		if !e.spend(to) {
			e.throttled++
			continue
		}
		e.sent[msg.Type]++
		e.out = append(e.out, Outgoing{Msg: msg, Gen: e.gen, Deadline: deadline})
	}
	if changed {
		e.m.note(slog.LevelInfo, "election", "algorithm", e.name, "leader", peer.ID(rd.State.Leader),
			"role", rd.State.Role, "term", rd.State.Term)
		e.m.moved = true
	}
	e.hush()
}

// deadline bounds one election message: the failure-detection timeout,
// so that an unreachable member is reported before the machine gives up.
func (e *elector) deadline() time.Duration {
	return time.Duration(max(e.timeout, 3*HeartbeatTicks)) * e.period
}

// The node's own budget of election messages to one peer: sendRate a
// second, sendBurst at once. A machine that reacts to every message it
// gets (a bully leader bullies back at every heartbeat of a process it
// ranks below itself, and members that disagree on a rank do so to each
// other at once) must not send a peer more than that peer lets through:
// the overlay refuses streams over rateLimit (50 a second, a burst of
// 100, all its protocols together) as a strike, and bans a peer after
// five. (A live failure had that shape: after a partition two bully
// leaders of one cluster ranked each other below themselves, and the
// cluster stayed split for minutes; a ban of the rightful leader is the
// likely reason it lasted, though the run kept no logs to show it.) A
// message over the budget is not sent, as if lost; the election machines
// bear losses. Honest traffic stays below it: a leader sends a member a
// heartbeat and, with Quorum, a claim every HeartbeatTicks; the largest
// burst is echo's, whose concurrent waves in a cluster of 64 send a
// neighbour some tens of messages at once (with a budget of 20 a second
// and 40 at once, echo's failover on 64 node machines went from 0.16 T
// to 1.8 T: the repair suite). The margin under rateLimit is for the
// lookups' queries.
const (
	sendRate  = 40
	sendBurst = 80
)

// bucket is a token bucket of sendRate, holding at most sendBurst.
type bucket struct {
	tokens float64
	at     time.Time
}

// spend takes one message from to's budget at the machine's time, and
// reports whether there was one.
func (e *elector) spend(to peer.ID) bool {
	now := e.m.now
	b := e.budget[to]
	if b == nil {
		if len(e.budget) > 4*len(e.peers)+64 {
			// Forget the peers that are no members: their buckets would
			// be full again by the time they are.
			for p := range e.budget {
				if !slices.Contains(e.peers, p) {
					delete(e.budget, p)
				}
			}
		}
		b = &bucket{tokens: sendBurst, at: now}
		e.budget[to] = b
	}
	b.tokens = min(sendBurst, b.tokens+now.Sub(b.at).Seconds()*sendRate)
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// step takes an election message from a member of the cluster, or one
// that a relayer passes on of a member's election (see relayer).
func (e *elector) step(_ time.Time, msg classic.Message) {
	if e.mach == nil || msg.Type == classic.MsgUnreachable {
		e.dropped++
		return
	}
	if !slices.Contains(e.peers, peer.ID(msg.From)) {
		msg.To = classic.ID(e.self)
		if !e.relayer(msg) {
			e.dropped++
			return
		}
	}
	if peer.ID(msg.From) == e.cutOff {
		e.cutOff = "" // back: its connection was lost, not the peer
	}
	msg.To = classic.ID(e.self)
	e.mach.Step(msg)
	e.drain()
}

// relayer reports whether msg, from a peer that is not a member of this
// node's view, is a member's ring election passed on (classic.Relayer,
// Ring.Relays) by a peer that could be one: its key is in the cluster
// (the claimer it registered with holds the roster this node does not;
// see ARCHITECTURE.md, "Who may speak"), and it counts as any member must
// (admitted: seen on a connection, of no flooded address group). Any
// other peer could hold a ring cluster on its dead superpeer by relaying
// results that name it (found in review: 50-96 % of the samples), where
// a peer of the cluster could do no more than register and be a member.
func (e *elector) relayer(msg classic.Message) bool {
	r, ok := e.mach.(classic.Relayer)
	if !ok || !r.Relays(msg) {
		return false
	}
	from := peer.ID(msg.From)
	return dhtselect.KeyOf(from).Cluster(e.k) == e.key && e.m.admitted(from)
}

// sendFailed tells the machine that a message it sent did not arrive,
// unless the machine has been rebuilt since (the notice is for another
// cluster).
func (e *elector) sendFailed(_ time.Time, f SendFailed) {
	if e.mach == nil || f.Gen != e.gen {
		return
	}
	e.mach.Step(classic.Message{Type: classic.MsgUnreachable, From: classic.ID(f.To), To: classic.ID(e.self)})
	e.drain()
}

// geoCluster runs the geometric cluster's election: the holder ranks
// first, and the lookup's part is the holder's.
func (e *elector) geoCluster(now time.Time, c GeoCluster) {
	sp, err := e.superpeer(now, 0, c.Key, c.Members, c.Holder, c.Holder)
	if err != nil {
		e.m.note(slog.LevelWarn, "election", "err", err)
		sp = ""
	}
	e.geoSP = sp
}

// superpeer brings the machine up to date with the cluster the selector
// found and returns the superpeer: the election's leader when it has one
// among the members, else the selector's answer (lookup); with Quorum,
// none: a peer that cannot reach a majority has no superpeer rather than
// one that the other side of a partition may not know of. first, when not
// empty, ranks above every member (the geometric strategy's token holder).
func (e *elector) superpeer(now time.Time, k int, key dhtselect.Key, members []peer.ID, lookup, first peer.ID) (peer.ID, error) {
	e.lookup = lookup
	demoted := e.m.rankedLast(members)
	if !e.m.cfg.IgnoreFlaps {
		flapping := e.flapping(now)
		e.selfFlapping = flapping[e.self]
		maps.Copy(demoted, flapping)
	}
	target := key
	if first == "" {
		target = e.m.ep.target(now, k, key)
	}
	retarget := e.mach != nil && key == e.key && target != e.target
	if e.mach == nil || k != e.k || key != e.key || !slices.Equal(members, e.peers) || !maps.Equal(demoted, e.demoted) || first != e.first || target != e.target ||
		e.retune(key, members) {
		if len(demoted) > 0 || len(e.demoted) > 0 {
			e.m.note(slog.LevelInfo, "election: host quality", "ranked last", fmt.Sprint(slices.Sorted(maps.Keys(demoted))))
		}
		e.demoted, e.first, e.target = demoted, first, target
		e.selfDemoted = demoted[e.self]
		if !e.reconfigure(k, key, members) {
			if err := e.rebuild(k, key, members); err != nil {
				return "", err
			}
		}
	}
	if retarget && lookup == e.self && !demoted[e.self] && handsOver(e.name) && e.state.Leader != classic.ID(e.self) {
		// A new epoch's target (epoch.go) names this node: every
		// member's rank changed at once, and the old leader would stand
		// until the hand-over rule's half timeout.
		e.mach.Campaign()
		e.drain()
	}
	if l := peer.ID(e.state.Leader); l != "" && slices.Contains(e.peers, l) {
		e.last, e.between = l, time.Time{}
		return l, nil
	}
	if e.between.IsZero() {
		e.between = now
	}
	if e.opts.Quorum {
		return "", nil
	}
	if lookup == e.self && len(e.peers) > 1 && e.first != e.self && !e.leaderLost && e.led() {
		// The lookup names this node, no election has, and it has had no
		// leader to lose: it has just joined, and is not the superpeer
		// before it is elected. Its mates may not know it yet (a node
		// that has just joined is in their membership views only once its
		// announcement has reached them, and until then they drop its
		// election messages), and while they follow the leader they had,
		// its claim would be a second superpeer (found by the node
		// simulator under churn: every joiner closest to its cluster's
		// key claimed it for seconds). It is elected soon: the leader's
		// machine, rebuilt for the new member, campaigns, or it campaigns
		// itself half a timeout after it hears another leader, or two
		// timeouts after it has heard none. Only when another member
		// announces that it serves the cluster (e.led): in a cluster that
		// has none (a network starting) nobody would elect it before two
		// timeouts. A node that lost its leader (a failover) takes the
		// lookup's answer while the election runs, as every member does:
		// a superpeer's goodbye hands over in a few round trips, not a
		// timeout.
		return "", nil
	}
	if e.last != "" && e.last != lookup && slices.Contains(e.peers, e.last) && (e.demoted[lookup] || e.stranger(now, lookup)) {
		// The lookup names a flapping member (the closest to the key):
		// while the election runs, the last leader stands instead, or
		// every election the flapping node starts when it comes back
		// would name it superpeer meanwhile. The same for a lookup that
		// names a peer this node's view does not hold, for one timeout
		// (see stranger).
		return e.last, nil
	}
	return lookup, nil
}

// stranger reports whether the lookup's answer p is a peer this node's
// view does not hold (it has not registered with the cluster, or not
// since it came back), while the election has had no leader for less than
// a failure-detection timeout and the last leader's connection is not
// lost. Such a peer's flags are unknown here: a flapping node that has
// just come back is the closest to its key, and its mates learn that it
// flaps from its registration. Meanwhile the election it starts when it
// comes back (with no leader, it makes every member above it campaign,
// as bully does) left its mates without a leader for a round trip, and
// those that had not heard its registration yet named it (live:
// TestFlapScenario, a "win" of 0.1 to 0.2 s about one run in five under
// load). The live leader answers that election within a round trip; a
// leader whose connection is lost is not waited for (cutOff), and an
// unknown peer that the election does not elect is named after one
// timeout, as the lookup's answer always was (a member's view is its
// superpeer's roster: the rightful superpeer may be in nobody's view
// until somebody registers with it).
func (e *elector) stranger(now time.Time, p peer.ID) bool {
	if _, ok := e.m.member(p); ok || e.last == e.cutOff {
		return false
	}
	end := e.between.Add(time.Duration(e.timeout) * e.period)
	if !now.Before(end) {
		return false
	}
	e.m.evaluateAt(end)
	return true
}

// rebuild builds a machine for a new cluster or member set. A fresh
// machine knows no leader; it learns it from the leader's next heartbeat.
// The node campaigns at once when it led before (to re-assert itself to
// the new set), when the old machine ran an election after the
// connection to its leader was lost and that leader has left the members
// (the election goes on among the new set rather than wait a timeout for
// heartbeats that stopped: a dead superpeer leaves the members' views
// during its failover, and the heir, whose machine was rebuilt then, won
// a timeout later, not at once; a leader still a member may only have
// lost that connection, and its next heartbeat brings the fresh machine
// back to it), and on its first
// machine when the lookup names it and no member can be unaware of it:
// it is alone in its cluster, or it is the geometric cluster's token
// holder, whom every member ranks first.
// Otherwise it waits like any follower (see superpeer). A joining node
// whose lookup names another does not campaign: its membership view is
// still filling, and with the true leader missing from it, it would win
// an election it should lose (seen with node processes joining a
// churning network: two claims of one cluster for 8 s each time).
func (e *elector) rebuild(k int, key dhtselect.Key, members []peer.ID) error {
	first, oldKey := e.mach == nil, e.key
	// A node that ranks itself last (it flaps, or is private) among other
	// members cannot win their election while any of them lives: it
	// neither re-asserts a leadership it had nor carries it (see below).
	// A flapping node came back from its outage as the leader it was
	// while cut off, and its campaign and COORDINATOR made its mates
	// drop their live leader for a round trip (live: TestFlapScenario).
	quiet := e.demoted[e.self] && len(members) > 1
	led := !quiet && (e.state.Role == classic.Leader || e.state.Leader == classic.ID(e.self))
	electing := handsOver(e.name) && e.state.Role == classic.Candidate && oldKey == key &&
		e.cutOff != "" && !slices.Contains(members, e.cutOff)
	oldQ, _ := e.mach.(*classic.Quorum)
	if oldQ != nil {
		e.hard[e.key] = oldQ.HardState()
	}
	cfg := e.config(key, members)
	cfg.Rand = rand.New(rand.NewPCG(e.rng.Uint64(), e.rng.Uint64()))
	ids := cfg.Peers
	opts := e.opts
	opts.HardState = e.hard[key]
	if opts.HardState.Vote != classic.None && !slices.Contains(ids, opts.HardState.Vote) {
		// The peer we voted for in this cluster is no member now: the
		// term is kept (no vote below it), the vote cannot be given again
		// in it anyway since the claimant is gone.
		opts.HardState.Vote = classic.ID(e.self)
	}
	mach, err := classic.New(e.name, cfg, opts)
	if err != nil {
		return fmt.Errorf("election: %w", err)
	}
	if q, ok := mach.(*classic.Quorum); ok && oldQ != nil {
		q.Hold(oldQ.PromiseLeft()) // a promise made for a longer lease runs out first
	}
	e.mach, e.k, e.key, e.peers, e.timeout = mach, k, key, slices.Clone(members), cfg.TimeoutTicks
	e.gen++
	// The new machine knows no leader yet. The old one's leader, if it is
	// still a member, stands until the new machine names one (its next
	// heartbeat usually), so that a change of members is not reported as
	// a lost superpeer; one that is no longer a member is lost. It stands
	// one failure-detection timeout at most, and with Quorum this node
	// stands as leader no longer than the lease its old machine held: the
	// new machine may never name it (the minority side of a partition),
	// and a leader carried on for longer would be a split brain.
	// Between two leaders (an election running), the superpeer the node
	// names meanwhile (the lookup's answer) stands the same way, unless
	// under Quorum: a fresh machine follows the first member that
	// announces itself, and one that announces itself to the members
	// below it would hold those whose machine was rebuilt then (issue
	// 19's hostile member under ring, whose forged results make the heir
	// campaign every few heartbeats).
	e.differ, e.orphan = 0, 0
	// A lookup's answer carried by an earlier rebuild stays unconfirmed
	// when this one carries it again: no machine has elected it yet, and
	// its election is still news (on the old rule a second rebuild before
	// the heir's first heartbeat took it for elected, and the member never
	// reported electing its successor: TestElectionFailover in CI).
	l := e.state.Leader
	unconfirmed := e.unconfirmed && l != classic.None
	if sp := classic.ID(e.m.state.Superpeer); l == classic.None && oldQ == nil && !e.opts.Quorum && sp != classic.ID(e.self) {
		l, unconfirmed = sp, true
	}
	carry := 0
	// A leader whose connection was lost and who has not been heard from
	// since is not carried, though the roster still holds it (a member's
	// roster keeps a crashed superpeer until its TTL): the connection's
	// loss dropped it (lost), and a rebuild that carried it again held
	// the members that rebuilt after the loss (a new member, the lookup's
	// answer joining the electorate) on the dead superpeer for a timeout
	// (found live in the 64-node kill-superpeer scenario in virtual time
	// with the scoped membership: one kill in three failed over in 1 T,
	// the others in 0.15 T).
	if l != classic.None && slices.Contains(ids, l) && oldKey == key && peer.ID(l) != e.cutOff && !(quiet && l == classic.ID(e.self)) {
		carry = e.timeout
		if oldQ != nil && l == classic.ID(e.self) {
			carry = oldQ.LeaseLeft()
		}
	}
	if carry > 0 {
		e.state, e.carried, e.unconfirmed = classic.State{Leader: l, Term: e.state.Term}, carry, unconfirmed
	} else {
		if l != classic.None {
			e.events = append(e.events, ElectionEvent{Lost: true, Superpeer: peer.ID(l)})
		}
		e.state, e.carried, e.unconfirmed = classic.State{}, 0, false
	}
	alone := len(members) == 1 || e.first == e.self || !e.led()
	e.hush()
	if first && e.lookup == e.self && alone || led || electing {
		e.mach.Campaign()
	}
	e.drain()
	return nil
}

// leave drops the election: the node is in no cluster (a geometric node
// attached to no superpeer). The quorum's hard state is kept; a leader
// it named is lost.
func (e *elector) leave() {
	if e.mach == nil {
		return
	}
	if q, ok := e.mach.(*classic.Quorum); ok {
		if hs := q.HardState(); hs != e.hard[e.key] {
			e.hard[e.key], e.hardOut = hs, true
		}
	}
	if e.state.Leader != classic.None {
		e.events = append(e.events, ElectionEvent{Lost: true, Superpeer: peer.ID(e.state.Leader)})
		e.m.moved = true
	}
	e.mach, e.k, e.key, e.peers = nil, 0, dhtselect.Key{}, nil
	e.state, e.carried, e.differ, e.orphan, e.leaderLost, e.geoSP, e.between = classic.State{}, 0, 0, 0, false, "", time.Time{}
	e.gen++
}

// led reports whether another member of the cluster announces that it
// serves the cluster as its superpeer.
func (e *elector) led() bool {
	for _, p := range e.peers {
		if m, ok := e.m.member(p); ok && p != e.self && m.Superpeer {
			return true
		}
	}
	return false
}

// retune reports whether the RTTs to the members have changed so much
// since the machine was built that its timeout should follow: by more
// than a tenth (and one tick). The first machine is often built from
// libp2p's RTT estimate, before the node has pinged its members (kad-dht's
// estimate is of a whole query, several RTTs: live timeouts of 2.3 s
// where 50 ms RTTs give 1.7 s); the margin keeps a machine from being
// rebuilt for every wobble of a measured RTT.
func (e *elector) retune(key dhtselect.Key, members []peer.ID) bool {
	t := e.config(key, members).TimeoutTicks
	return max(t-e.timeout, e.timeout-t) > max(1, e.timeout/10)
}

// config is the machine configuration for the cluster key and members,
// Rand left nil.
func (e *elector) config(key dhtselect.Key, members []peer.ID) classic.Config {
	ids := make([]classic.ID, len(members))
	var rtt time.Duration
	for i, p := range members {
		ids[i] = classic.ID(p)
		if p != e.self {
			rtt = max(rtt, e.m.rtt(p))
		}
	}
	timeout := TimeoutTicks(rtt, e.period)
	if e.name == "ring" || e.name == "ring-max" {
		// A ring's timeout must exceed two turns of the ring (classic's
		// Ring): with the overlay's timeout alone a ring of 64 members at
		// 50 ms never finished an election (found by the repair suite on
		// node machines).
		timeout = max(timeout, ringTicks(len(members), rtt, e.period))
	}
	return classic.Config{
		ID: classic.ID(e.self), Peers: ids,
		Rank:           e.rank(),
		HeartbeatTicks: HeartbeatTicks, TimeoutTicks: timeout,
	}
}

// reconfigure gives a machine that implements classic.Reconfigurer the new
// members (and rank) of the same cluster, and reports whether it did;
// otherwise (another cluster, another algorithm, an error) the caller
// rebuilds the machine. The machine keeps its leader or group, so a change
// of members is no election.
func (e *elector) reconfigure(k int, key dhtselect.Key, members []peer.ID) bool {
	r, ok := e.mach.(classic.Reconfigurer)
	if !ok || k != e.k || key != e.key {
		return false
	}
	cfg := e.config(key, members) // Rand nil: the machine keeps its own
	lease := 0
	if q, ok := e.mach.(*classic.Quorum); ok && e.state.Leader == classic.ID(e.self) {
		// A Quorum keeps its promises, and the lease they back, but its
		// inner machine may be built afresh and campaign (stable polls,
		// a candidate waits): this node stands as leader for that lease,
		// as rebuild carries it, rather than drop the cluster meanwhile.
		lease = q.LeaseLeft()
	}
	if err := r.Reconfigure(cfg); err != nil {
		level := slog.LevelWarn
		if errors.Is(err, classic.ErrRebuild) {
			level = slog.LevelDebug // a change the machine does not take in place
		}
		e.m.note(level, "election: reconfigure", "err", err)
		return false
	}
	e.peers, e.timeout = slices.Clone(members), cfg.TimeoutTicks
	e.differ, e.orphan = 0, 0
	e.carried = max(e.carried, lease)
	e.drain()
	return true
}

// flapping returns this node as flapping when it lost all its
// connections flapLimit times within flapWindow before now.
func (e *elector) flapping(now time.Time) map[peer.ID]bool {
	e.outages = slices.DeleteFunc(e.outages, func(t time.Time) bool { return now.Sub(t) > flapWindow })
	out := map[peer.ID]bool{}
	if len(e.outages) < flapLimit {
		return out
	}
	out[e.self] = true
	// The node re-evaluates when the oldest outage expires, so that its
	// demotion ends when it says so, not at its next period.
	e.m.evaluateAt(e.outages[0].Add(flapWindow + time.Millisecond))
	return out
}

// rank is the members' ranking: by closeness to the target, first above
// all, the demoted below all.
func (e *elector) rank() rank {
	return rank{inner: classic.XORCloseness{Target: e.target[:]}, first: e.first, demoted: e.demoted}
}

// outranks reports whether a ranks above b in the cluster (see rank).
func (e *elector) outranks(a, b classic.ID) bool {
	return e.rank().Compare(a, b) > 0
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

// lost is told that the last connection to p closed; connected is the
// number of peers still connected. With none left it is an outage of this
// node's own (host quality). When p is the leader the machine campaigns
// at once: a failure notice that echo, which has no heartbeats of its own,
// needs, and that saves the others a timeout.
func (e *elector) lost(now time.Time, p peer.ID, connected int) {
	if e.mach == nil || p == e.self {
		return
	}
	if connected == 0 {
		e.outage(now)
	}
	if e.state.Leader == classic.None && p == e.m.state.Superpeer {
		// The superpeer this node had, named by its lookup while its
		// election had heard of no leader yet (it has just joined), is
		// gone: it has lost a leader as a member that followed it has,
		// and takes the lookup's answer while the election runs (see
		// superpeer), rather than wait to be elected while the dead
		// superpeer's announcement lives on (found live: a joiner the
		// lookup named after a kill took the role a timeout after the
		// other members named it).
		e.leaderLost = true
		e.cutOff = p
	}
	if peer.ID(e.state.Leader) != p {
		return
	}
	e.cutOff = p
	e.m.note(slog.LevelInfo, "election: lost the connection to the leader", "leader", p)
	// A leader carried across a rebuild (see rebuild) is dropped with its
	// connection: the fresh machine never knew it, so its campaign changes
	// nothing that drain would see, and the dead leader stood until the
	// carry ran out, a timeout later (found in the live 64-node
	// kill-superpeer scenario in virtual time: the members whose machine
	// had just been rebuilt for a joiner named the dead superpeer for
	// 1.5 s, the others for 75 ms).
	e.carried = 0
	e.mach.Campaign() // a passive machine (hushed) forgets the leader, or polls (stable)
	e.drain()
}

// ElectionStatus is the election's state and counters.
type ElectionStatus struct {
	// Algorithm is Config.Election; empty when the node runs none.
	Algorithm string
	// Lookup is the lookup's last answer for the cluster key, which the
	// election's Leader should agree with.
	Lookup peer.ID
	// First is the member ranked above all (the geometric cluster's token
	// holder), if any.
	First peer.ID
	// Leader, Role and Term are the machine's current state.
	Leader peer.ID
	Role   string
	Term   uint64
	// Demoted are the members ranked last (host quality: private or
	// flapping), sorted.
	Demoted []peer.ID
	// Timeout is the current failure-detection timeout.
	Timeout time.Duration
	// Sent counts the messages sent, by type name.
	Sent map[string]uint64
	// Dropped counts messages received from non-members (but the ring
	// relays taken: see relayer).
	Dropped uint64
	// Throttled counts messages not sent because they were over the
	// node's budget for their peer (sendRate).
	Throttled uint64
	// Flooded counts the times a member was caught sending more than the
	// algorithm allows an honest one (classic.Ready.Flooders), its
	// message dropped: at most one a member in each Ready.
	Flooded uint64
}

// Election returns the election's state and counters (zero without an
// election).
func (m *Machine) Election() ElectionStatus {
	e := m.el
	if e == nil {
		return ElectionStatus{}
	}
	st := ElectionStatus{
		Algorithm: e.name, Lookup: e.lookup, First: e.first, Leader: peer.ID(e.state.Leader), Role: e.state.Role.String(), Term: e.state.Term,
		Timeout: time.Duration(e.timeout) * e.period, Sent: map[string]uint64{}, Dropped: e.dropped, Throttled: e.throttled, Flooded: e.flooded,
	}
	for t, c := range e.sent {
		st.Sent[t.String()] = c
	}
	for p := range e.demoted {
		st.Demoted = append(st.Demoted, p)
	}
	slices.Sort(st.Demoted)
	return st
}

// Elected is what Election says of the leader, cheaply (Election copies
// the counters): the lookup's last answer and the election's leader.
// Empty without an election.
func (m *Machine) Elected() (lookup, leader peer.ID) {
	if m.el == nil {
		return "", ""
	}
	return m.el.lookup, peer.ID(m.el.state.Leader)
}

// Demotes reports whether the election ranks p last (Election's Demoted).
func (m *Machine) Demotes(p peer.ID) bool { return m.el != nil && m.el.demoted[p] }

// Detection is the current failure-detection timeout (0 without an
// election or before the first cluster).
func (m *Machine) Detection() time.Duration {
	if m.el == nil {
		return 0
	}
	return time.Duration(m.el.timeout) * m.el.period
}

// MessageDeadline bounds one election message, sent or received.
func (m *Machine) MessageDeadline() time.Duration {
	if m.el == nil {
		return 0
	}
	return m.el.deadline()
}
