package testnet

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	ma "github.com/multiformats/go-multiaddr"

	"github.com/superpeer/superpeer/overlay"
)

// procFabric runs every node as its own OS process, `peer run --control`,
// listening on loopback TCP and QUIC, and drives it by the control
// protocol (control.go).
type procFabric struct {
	cfg *Config
	dir string // key files and data directories

	mu    sync.Mutex
	procs map[int]*proc // live processes
}

func newProcFabric(cfg *Config) (*procFabric, error) {
	dir, err := os.MkdirTemp("", "superpeer-testnet-")
	if err != nil {
		return nil, fmt.Errorf("testnet: %w", err)
	}
	return &procFabric{cfg: cfg, dir: dir, procs: map[int]*proc{}}, nil
}

// proc is one node process: the Member its last report shows.
type proc struct {
	i     int
	id    peer.ID
	cmd   *exec.Cmd
	stdin io.WriteCloser
	inMu  sync.Mutex // one command line at a time

	mu     sync.Mutex
	addrs  []ma.Multiaddr // as of the last report
	report controlReport  // the last report
	state  overlay.State
	stats  overlay.ElectionStats
	ready  chan struct{} // closed on the first report
	exited chan struct{} // closed when the process is gone
	killed bool          // by kill or close: its exit is expected
	err    error         // why it exited, when not killed
	tail   []string      // its last lines of standard error that were not logs
}

var _ Member = (*proc)(nil)

func (p *proc) ID() peer.ID { return p.id }

// State is the node's state as of its last report.
func (p *proc) State() overlay.State {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.state
}

// ElectionStats are the node's election counters as of its last report.
func (p *proc) ElectionStats() overlay.ElectionStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// MembershipStatus is the node's membership as of its last report (nil
// without the DHT strategy's).
func (p *proc) MembershipStatus() *overlay.MembershipStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.report.Membership
}

// failure returns why the process exited unexpectedly, or nil.
func (p *proc) failure() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// args are the `peer run` arguments of node i: its key file, its own
// data directory (with --quorum its terms and votes go there, so that a
// process restarted with the same key finds them), and its own loopback
// address (loopbackAddr).
func (f *procFabric) args(i int, keyFile, dataDir string, boot []ma.Multiaddr) []string {
	c := f.cfg
	ip := loopbackAddr(i)
	a := []string{"run", "--control", "--identity", keyFile, "--data-dir", dataDir,
		"--listen", "/ip4/" + ip + "/tcp/0,/ip4/" + ip + "/udp/0/quic-v1",
		"--announce", c.AnnounceInterval.String(), "--reevaluate", c.ReevaluateInterval.String(),
		"--strategy", c.Strategy, "--log-format", "json", "--log-level", logLevel(c.Logger),
	}
	if c.Target.Superpeers > 0 {
		a = append(a, "--superpeers", strconv.Itoa(c.Target.Superpeers))
	} else {
		a = append(a, "--fraction", strconv.FormatFloat(c.Target.Fraction, 'g', -1, 64))
	}
	if c.Geometric.Capacity > 0 {
		a = append(a, "--capacity", strconv.Itoa(c.Geometric.Capacity))
	}
	if c.Election != "" {
		a = append(a, "--election", c.Election)
	}
	if c.Quorum {
		a = append(a, "--quorum")
	}
	if c.IgnoreFlaps {
		a = append(a, "--ignore-flaps")
	}
	if len(boot) > 0 {
		s := make([]string, len(boot))
		for i, m := range boot {
			s[i] = m.String()
		}
		a = append(a, "--bootstrap", strings.Join(s, ","))
	}
	return a
}

// loopbackAddr is node i's own loopback address, 127.1.x.y (Linux routes
// all of 127/8 to the loopback interface): the nodes count the identities
// each address shows (overlay's MaxPerAddr), and processes that all
// listened on 127.0.0.1 would show one address with every identity. Node
// processes dial from their listening address over TCP (overlay's
// transportOptions) and QUIC (quicOptions). 127.0.0.1 stays the
// attackers' (testnet/attack). Elsewhere than on Linux (macOS configures
// 127.0.0.1 alone) every node is on 127.0.0.1, and a testnet of more
// than overlay's DefaultMaxPerAddr + 1 processes does not converge.
func loopbackAddr(i int) string {
	if runtime.GOOS != "linux" {
		return "127.0.0.1"
	}
	return fmt.Sprintf("127.1.%d.%d", (i/250)%256, i%250+2)
}

// logLevel is the lowest level l passes on; the processes log at it.
func logLevel(l *slog.Logger) string {
	for _, lv := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn} {
		if l.Enabled(context.Background(), lv) {
			return strings.ToLower(lv.String())
		}
	}
	return "error"
}

func (f *procFabric) start(ctx context.Context, i int, sk crypto.PrivKey, boot int) (Member, error) {
	id, err := peer.IDFromPrivateKey(sk)
	if err != nil {
		return nil, err
	}
	keyFile := filepath.Join(f.dir, fmt.Sprintf("node-%d.key", i))
	if err := overlay.SaveIdentity(keyFile, sk); err != nil {
		return nil, fmt.Errorf("testnet: node %d: %w", i, err)
	}
	var bootAddrs []ma.Multiaddr
	if boot >= 0 {
		f.mu.Lock()
		b := f.procs[boot]
		f.mu.Unlock()
		if b == nil {
			return nil, fmt.Errorf("testnet: node %d: no live node %d to bootstrap from", i, boot)
		}
		b.mu.Lock()
		for _, a := range b.addrs {
			bootAddrs = append(bootAddrs, a.Encapsulate(ma.StringCast("/p2p/"+b.id.String())))
		}
		b.mu.Unlock()
	}
	dataDir := filepath.Join(f.dir, fmt.Sprintf("node-%d.data", i))
	cmd := exec.Command(f.cfg.Exec, f.args(i, keyFile, dataDir, bootAddrs)...)
	cmd.SysProcAttr = procAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("testnet: node %d: %w", i, err)
	}
	p := &proc{i: i, id: id, cmd: cmd, stdin: stdin, ready: make(chan struct{}), exited: make(chan struct{})}
	f.mu.Lock()
	f.procs[i] = p
	f.mu.Unlock()
	var pipes sync.WaitGroup
	pipes.Go(func() { f.readReports(p, stdout) })
	pipes.Go(func() { f.readLogs(p, stderr) })
	go func() {
		pipes.Wait() // Wait closes the pipes: read them to the end first
		err := cmd.Wait()
		p.mu.Lock()
		if !p.killed && p.err == nil {
			p.err = fmt.Errorf("node %d (%s) exited: %v; its last output: %q", i, id.ShortString(), err, p.tail)
		}
		p.mu.Unlock()
		close(p.exited)
	}()
	select {
	case <-p.ready:
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("testnet: %w", p.failure())
	case <-ctx.Done():
		return nil, fmt.Errorf("testnet: node %d did not report before %w", i, ctx.Err())
	}
}

// readReports keeps p's last report.
func (f *procFabric) readReports(p *proc, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	first := true
	for sc.Scan() {
		var (
			rep   controlReport
			state overlay.State
			stats overlay.ElectionStats
		)
		err := json.Unmarshal(sc.Bytes(), &rep)
		if err == nil {
			state, stats, err = rep.decode()
		}
		if err != nil {
			p.mu.Lock()
			p.err = fmt.Errorf("node %d (%s): bad report %.200q: %w", p.i, p.id.ShortString(), sc.Text(), err)
			p.mu.Unlock()
			_ = p.cmd.Process.Kill()
			break
		}
		p.mu.Lock()
		p.addrs, p.state, p.stats, p.report = rep.Addrs, state, stats, rep
		p.mu.Unlock()
		if first {
			first = false
			close(p.ready)
		}
	}
	_, _ = io.Copy(io.Discard, r)
}

// readLogs hands the process's JSON log records on to the Net's logger,
// and keeps its last other lines (a panic, a usage error) for the error
// when it exits.
func (f *procFabric) readLogs(p *proc, r io.Reader) {
	log := f.cfg.Logger.With("node", p.i)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			p.mu.Lock()
			p.tail = append(p.tail, sc.Text())
			if len(p.tail) > 8 {
				p.tail = p.tail[1:]
			}
			p.mu.Unlock()
			continue
		}
		var lv slog.Level
		if s, ok := rec[slog.LevelKey].(string); !ok || lv.UnmarshalText([]byte(s)) != nil {
			lv = slog.LevelInfo
		}
		msg, _ := rec[slog.MessageKey].(string)
		attrs := make([]any, 0, 2*len(rec))
		for k, v := range rec {
			if k != slog.LevelKey && k != slog.MessageKey && k != slog.TimeKey {
				attrs = append(attrs, k, v)
			}
		}
		log.Log(context.Background(), lv, msg, attrs...)
	}
	_, _ = io.Copy(io.Discard, r)
}

// get returns the live process of node i.
func (f *procFabric) get(i int) (*proc, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.procs[i]
	if p == nil {
		return nil, fmt.Errorf("testnet: no live node process %d", i)
	}
	return p, nil
}

// send writes one command line to node i.
func (f *procFabric) send(i int, line string) error {
	p, err := f.get(i)
	if err != nil {
		return err
	}
	p.inMu.Lock()
	defer p.inMu.Unlock()
	if _, err := io.WriteString(p.stdin, line); err != nil {
		return fmt.Errorf("testnet: node %d: %w", i, errors.Join(err, p.failure()))
	}
	return nil
}

// cut makes each of the two processes block the other.
func (f *procFabric) cut(i, j int) error { return f.gate("block", i, j) }

func (f *procFabric) mend(i, j int) error { return f.gate("unblock", i, j) }

func (f *procFabric) gate(verb string, i, j int) error {
	a, err := f.get(i)
	if err != nil {
		return err
	}
	b, err := f.get(j)
	if err != nil {
		return err
	}
	return errors.Join(f.send(i, command(verb, b.id)), f.send(j, command(verb, a.id)))
}

// shutdownBound is how long a node process may take to exit after
// SIGTERM before it gets SIGKILL: more than its Close can take (a goodbye
// bounded by 10 s, then its parts).
const shutdownBound = 30 * time.Second

// kill sends node i SIGKILL (graceful: SIGTERM, on which peer run closes
// its node, and SIGKILL if it is not gone within shutdownBound) and waits
// until it is gone.
func (f *procFabric) kill(i int, graceful bool) error {
	p, err := f.get(i)
	if err != nil {
		return err
	}
	f.mu.Lock()
	delete(f.procs, i)
	f.mu.Unlock()
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	if graceful {
		err = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(shutdownBound):
			err = errors.Join(err, fmt.Errorf("no exit within %v of SIGTERM", shutdownBound), p.cmd.Process.Kill())
		}
	} else {
		err = p.cmd.Process.Kill()
	}
	<-p.exited
	if errors.Is(err, os.ErrProcessDone) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("testnet: kill node %d: %w", i, err)
	}
	return nil
}

// failed returns the unexpected exits of live processes.
func (f *procFabric) failed() []error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []error
	for _, p := range f.procs {
		if err := p.failure(); err != nil {
			out = append(out, err)
		}
	}
	return out
}

// closeGrace is how long close waits for a process to stop by itself
// before it kills it.
const closeGrace = 5 * time.Second

// close ends every process's standard input, which makes it stop with a
// normal Close, kills those that have not stopped after closeGrace, and
// removes the key files and data directories.
func (f *procFabric) close() error {
	f.mu.Lock()
	procs := f.procs
	f.procs = map[int]*proc{}
	f.mu.Unlock()
	for _, p := range procs {
		p.mu.Lock()
		p.killed = true
		p.mu.Unlock()
		p.inMu.Lock()
		_ = p.stdin.Close()
		p.inMu.Unlock()
	}
	deadline := time.After(closeGrace)
	for _, p := range procs {
		select {
		case <-p.exited:
		case <-deadline:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
	}
	return os.RemoveAll(f.dir)
}
