package testnet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/connmgr"
	"github.com/libp2p/go-libp2p/core/control"
	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/internal/cputime"
	"github.com/superpeer/superpeer/overlay"
)

// The control protocol between a Net and its node processes (Config.Exec).
// The parent runs `peer run --control` with pipes for standard input and
// output; the node then
//
//   - writes a report, one line of JSON (controlReport), on its standard
//     output whenever its view changed or it used reportCPUStep of CPU
//     time, checked every reportPeriod;
//   - reads commands, one per line, on its standard input: "block ID…"
//     cuts it off from those peers (its connection gater refuses them and
//     their open connections are closed), "unblock ID…" lets them back;
//   - stops, with a normal Close, when its standard input ends (the parent
//     closed it, or died).
//
// Its logs go to standard error as JSON, which the parent hands on to its
// own logger.

// reportPeriod is how often a node process checks whether to report.
const reportPeriod = 50 * time.Millisecond

// controlReport is one line of a node process's standard output.
type controlReport struct {
	Addrs    []ma.Multiaddr `json:"addrs"`
	State    wireState      `json:"state"`
	Election wireElection   `json:"election"`
	// Goroutines is the process's number of goroutines, Banned the peers
	// its node bans now, CPUMicros its CPU time so far, to the
	// microsecond (0 where it cannot be read); for Net.Process.
	Goroutines int      `json:"goroutines"`
	Banned     []string `json:"banned,omitempty"`
	CPUMicros  int64    `json:"cpu_us,omitempty"`
	// Membership is the node's cluster-scoped membership (DHT strategy),
	// for a report's mismatches (electionNote).
	Membership *overlay.MembershipStatus `json:"membership,omitempty"`
}

// reportCPUStep is how much CPU time makes a report due by itself: a
// process's CPU time as its parent reads it is at most this much (and
// reportPeriod) old, without a report every reportPeriod of an idle node.
const reportCPUStep = time.Millisecond

// wireState and wireElection carry overlay.State and overlay.ElectionStats
// (every field but the superpeer's addresses: TestReportRoundTrip) with
// peer IDs as text, empty for none (peer.ID's own JSON refuses an empty
// ID). A field left out reads as zero in the parent, silently: the
// election's Demoted once was, and a procs scenario counted a flapping
// superpeer, passed over by design, as a 46 s disagreement.
type wireState struct {
	Self, Superpeer, Prefix string
	Role                    overlay.Role
	S, K, Token             int
	ClusterKey              dhtselect.Key
	Members                 []string
	Size                    dhtselect.Estimate
	Evaluations             uint64
	Lookups, Queries        uint64
	Coord                   *coordinate.Coordinate
}

type wireElection struct {
	Algorithm, Lookup, First, Leader, Role string
	Term                                   uint64
	Demoted                                []string
	Timeout                                time.Duration
	Sent                                   map[string]uint64
	Dropped, Throttled, Flooded            uint64
}

func toWire(s overlay.State, e overlay.ElectionStats) (wireState, wireElection) {
	ws := wireState{Self: idText(s.Self), Superpeer: idText(s.Superpeer.ID), Prefix: s.Prefix, Role: s.Role,
		S: s.S, K: s.K, Token: s.Token, ClusterKey: s.ClusterKey, Size: s.Size,
		Evaluations: s.Evaluations, Lookups: s.Lookups, Queries: s.Queries, Coord: s.Coord}
	for _, m := range s.Members {
		ws.Members = append(ws.Members, m.String())
	}
	we := wireElection{Algorithm: e.Algorithm, Lookup: idText(e.Lookup), First: idText(e.First), Leader: idText(e.Leader), Role: e.Role,
		Term: e.Term, Timeout: e.Timeout, Sent: e.Sent, Dropped: e.Dropped, Throttled: e.Throttled, Flooded: e.Flooded}
	for _, p := range e.Demoted {
		we.Demoted = append(we.Demoted, p.String())
	}
	return ws, we
}

func (r controlReport) decode() (overlay.State, overlay.ElectionStats, error) {
	var errs []error
	id := func(s string) peer.ID {
		if s == "" {
			return ""
		}
		p, err := peer.Decode(s)
		errs = append(errs, err)
		return p
	}
	ws, we := r.State, r.Election
	s := overlay.State{Self: id(ws.Self), Superpeer: peer.AddrInfo{ID: id(ws.Superpeer)}, Prefix: ws.Prefix, Role: ws.Role,
		S: ws.S, K: ws.K, Token: ws.Token, ClusterKey: ws.ClusterKey, Size: ws.Size,
		Evaluations: ws.Evaluations, Lookups: ws.Lookups, Queries: ws.Queries, Coord: ws.Coord}
	for _, m := range ws.Members {
		s.Members = append(s.Members, id(m))
	}
	e := overlay.ElectionStats{Algorithm: we.Algorithm, Lookup: id(we.Lookup), First: id(we.First), Leader: id(we.Leader), Role: we.Role,
		Term: we.Term, Timeout: we.Timeout, Sent: we.Sent, Dropped: we.Dropped, Throttled: we.Throttled, Flooded: we.Flooded}
	for _, p := range we.Demoted {
		e.Demoted = append(e.Demoted, id(p))
	}
	return s, e, errors.Join(errs...)
}

func idText(p peer.ID) string {
	if p == "" {
		return ""
	}
	return p.String()
}

// Blocker is a connection gater that refuses the peers it is told to
// block, in both directions. A node process under Control installs one.
type Blocker struct {
	mu      sync.Mutex
	blocked map[peer.ID]bool
}

var _ connmgr.ConnectionGater = (*Blocker)(nil)

// NewBlocker returns a Blocker that blocks no one.
func NewBlocker() *Blocker { return &Blocker{blocked: map[peer.ID]bool{}} }

func (b *Blocker) set(ids []peer.ID, block bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range ids {
		if block {
			b.blocked[p] = true
		} else {
			delete(b.blocked, p)
		}
	}
}

func (b *Blocker) allowed(p peer.ID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.blocked[p]
}

// InterceptPeerDial refuses to dial a blocked peer.
func (b *Blocker) InterceptPeerDial(p peer.ID) bool { return b.allowed(p) }

// InterceptAddrDial allows every address.
func (b *Blocker) InterceptAddrDial(peer.ID, ma.Multiaddr) bool { return true }

// InterceptAccept allows every incoming connection until its peer is known.
func (b *Blocker) InterceptAccept(network.ConnMultiaddrs) bool { return true }

// InterceptSecured refuses a connection, either way, with a blocked peer.
func (b *Blocker) InterceptSecured(_ network.Direction, p peer.ID, _ network.ConnMultiaddrs) bool {
	return b.allowed(p)
}

// InterceptUpgraded refuses a connection with a peer blocked since it was
// secured.
func (b *Blocker) InterceptUpgraded(c network.Conn) (bool, control.DisconnectReason) {
	return b.allowed(c.RemotePeer()), 0
}

// sweep closes the connections that n still has to blocked peers: one
// that was being set up while the peer was blocked can pass every check of
// the gater and join the swarm only after the block closed the others.
func (b *Blocker) sweep(n *overlay.Node) {
	b.mu.Lock()
	var open []peer.ID
	for p := range b.blocked {
		if n.Host().Network().Connectedness(p) == network.Connected {
			open = append(open, p)
		}
	}
	b.mu.Unlock()
	for _, p := range open {
		_ = n.Host().Network().ClosePeer(p)
	}
}

// Control serves the control protocol (see above) for node n, whose host
// was built with the gater b, until ctx ends or in does. It returns nil
// when in ends, and an error for a command it does not understand or a
// report it cannot write.
func Control(ctx context.Context, n *overlay.Node, b *Blocker, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	werr := make(chan error, 1)
	go func() { werr <- report(ctx, n, b, out) }()
	cerr := make(chan error, 1)
	go func() { cerr <- commands(n, b, in) }()
	select {
	case err := <-cerr:
		return err
	case err := <-werr:
		return err
	case <-ctx.Done():
		return nil
	}
}

// report writes n's report to out whenever it changed, or its CPU time
// grew by reportCPUStep, every reportPeriod, and sweeps b.
func report(ctx context.Context, n *overlay.Node, b *Blocker, out io.Writer) error {
	tick := time.NewTicker(reportPeriod)
	defer tick.Stop()
	var last *controlReport
	for {
		ws, we := toWire(n.State(), n.ElectionStats())
		rep := controlReport{Addrs: n.Host().Addrs(), State: ws, Election: we, Goroutines: runtime.NumGoroutine(), Membership: n.MembershipStatus()}
		for _, p := range n.Banned() {
			rep.Banned = append(rep.Banned, p.String())
		}
		if c, ok := cputime.Self(); ok {
			rep.CPUMicros = c.Microseconds()
		}
		if reportDue(rep, last) {
			line, err := json.Marshal(rep)
			if err != nil {
				return fmt.Errorf("control: report: %w", err)
			}
			if _, err := out.Write(append(line, '\n')); err != nil {
				return fmt.Errorf("control: report: %w", err)
			}
			last = &rep
		}
		b.sweep(n)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// reportDue says whether rep is worth writing after last (nil: none
// yet): something in it changed, or its CPU time grew by reportCPUStep.
// The CPU time grows all the time; alone, a little of it is not news.
func reportDue(rep controlReport, last *controlReport) bool {
	if last == nil {
		return true
	}
	grown := time.Duration(rep.CPUMicros-last.CPUMicros) * time.Microsecond
	rep.CPUMicros = last.CPUMicros
	return grown >= reportCPUStep || !reflect.DeepEqual(rep, *last)
}

// commands carries out the commands read from in until it ends.
func commands(n *overlay.Node, b *Blocker, in io.Reader) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		verb, ids, err := parseCommand(sc.Text())
		if err != nil {
			return err
		}
		b.set(ids, verb == "block")
		if verb == "block" {
			for _, p := range ids {
				_ = n.Host().Network().ClosePeer(p)
			}
		}
	}
	return sc.Err()
}

// parseCommand parses one command line: "block" or "unblock", then peer IDs.
func parseCommand(line string) (verb string, ids []peer.ID, err error) {
	f := strings.Fields(line)
	if len(f) == 0 || (f[0] != "block" && f[0] != "unblock") {
		return "", nil, fmt.Errorf("control: command %q: want block or unblock, then peer IDs", line)
	}
	for _, s := range f[1:] {
		p, err := peer.Decode(s)
		if err != nil {
			return "", nil, fmt.Errorf("control: command %q: %w", line, err)
		}
		ids = append(ids, p)
	}
	return f[0], ids, nil
}

// command formats a command line for parseCommand.
func command(verb string, ids ...peer.ID) string {
	var b strings.Builder
	b.WriteString(verb)
	for _, p := range ids {
		b.WriteByte(' ')
		b.WriteString(p.String())
	}
	b.WriteByte('\n')
	return b.String()
}
