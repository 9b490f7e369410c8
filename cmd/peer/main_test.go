package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/testnet"
)

var peerBin string

// TestMain builds the command once; the tests run it as users do.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "peer-test")
	if err != nil {
		panic(err)
	}
	peerBin = filepath.Join(dir, "peer")
	if out, err := exec.Command("go", "build", "-o", peerBin, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// Bad input: one line on stderr naming the problem, exit status 1, no panic.
func TestBadInput(t *testing.T) {
	type badInput struct {
		args []string
		want string
	}
	cases := []badInput{
		{[]string{"run", "--listen", "/ip4/127.0.0.1/tcp/notaport"}, "--listen"},
		{[]string{"run", "--bootstrap", "not-a-multiaddr"}, "--bootstrap"},
		{[]string{"run", "--bootstrap", "/ip4/127.0.0.1/tcp/1"}, "/p2p/"},
		{[]string{"run", "--superpeers", "0"}, "--superpeers 0"},
		{[]string{"run", "--fraction", "1.5"}, "--fraction 1.5"},
		{[]string{"run", "--network", "a b"}, "network name"},
		{[]string{"testnet", "-n", "0"}, "-n 0"},
		{[]string{"testnet", "-n", "200000"}, "-n 200000"},
		{[]string{"testnet", "--superpeers", "0"}, "--superpeers 0"},
		{[]string{"testnet", "--fraction", "1.5"}, "--fraction 1.5"},
		{[]string{"testnet", "--superpeers", "2", "--fraction", "0.5"}, "not both"},
		{[]string{"testnet", "--strategy", "nope", "-n", "2"}, "strategy"},
		{[]string{"testnet", "--bogus"}, "unknown flag"},
		{[]string{"testnet", "--strategy", "geometric", "-n", "4"}, "needs --superpeers"},
		{[]string{"testnet", "-n", "4", "--latency", "/nonexistent/matrix.txt"}, "--latency"},
		{[]string{"testnet", "-n", "4", "--memprofile", "/nonexistent/heap.prof"}, "--memprofile"},
		{[]string{"run", "--strategy", "geometric"}, "--superpeers"},
		{[]string{"run", "--strategy", "ring", "--superpeers", "2"}, "strategy"},
		{[]string{"run", "--strategy", "geometric", "--superpeers", "2", "--capacity", "0"}, "--capacity 0"},
		{[]string{"nonsense"}, "unknown command"},
		{[]string{"testnet", "-n", "4", "--scenario", "meteor"}, "--scenario"},
		{[]string{"testnet", "-n", "4", "--scenario", "kill-superpeer", "--kills", "0"}, "--kills 0"},
		{[]string{"testnet", "-n", "4", "--scenario", "churn", "--graceful"}, "--graceful"},
		{[]string{"status", "--timeout", "0s"}, "--timeout 0s"},
		{[]string{"testnet", "-n", "4", "--scenario", "churn", "--rate", "0"}, "--rate 0"},
		{[]string{"testnet", "-n", "4", "--scenario", "churn", "--rate", "1.5"}, "--rate 1.5"},
		{[]string{"testnet", "-n", "4", "--scenario", "partition", "--duration", "-1s"}, "--duration -1s"},
		{[]string{"testnet", "-n", "4", "--election", "raft"}, "election"},
		{[]string{"testnet", "-n", "4", "--quorum"}, "quorum"},
		{[]string{"run", "--identity", "/nonexistent/key"}, "does not exist"},
		{[]string{"testnet", "--procs", "-n", "300"}, "-n 300"},
		{[]string{"bench", "--suite", "speed"}, `unknown suite "speed"`},
		{[]string{"bench", "--sim", "--live"}, "not both"},
		{[]string{"bench", "--out", ""}, "--out"},
		{[]string{"run", "--public-bootstrap", "/ip4/127.0.0.1/tcp/1/p2p/12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA"}, "needs --public"},
		{[]string{"run", "--public", "--public-bootstrap", "/ip4/127.0.0.1/tcp/1"}, "/p2p/"},
		{[]string{"run", "--http", "127.0.0.1:notaport"}, "--http"},
		{[]string{"status", "--api", "127.0.0.1:1"}, "unreachable"},
		{[]string{"status", "--api", "127.0.0.1:1", "extra"}, "unknown command"},
	}
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	matrix := filepath.Join(t.TempDir(), "matrix.txt")
	if err := os.WriteFile(matrix, []byte("0\t10\n10\t0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	openKey := filepath.Join(t.TempDir(), "open.key")
	if out, err := exec.Command(peerBin, "id", "init", "--out", openKey).CombinedOutput(); err != nil {
		t.Fatalf("peer id init: %v\n%s", err, out)
	}
	if err := os.Chmod(openKey, 0o644); err != nil {
		t.Fatal(err)
	}
	// A data directory that is a file: given, or beside the identity file.
	keyDir := t.TempDir()
	goodKey := filepath.Join(keyDir, "node.key")
	if out, err := exec.Command(peerBin, "id", "init", "--out", goodKey).CombinedOutput(); err != nil {
		t.Fatalf("peer id init: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(keyDir, "node.data"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases = append(cases,
		badInput{[]string{"run", "--data-dir", keyFile, "--election", "bully", "--quorum"}, keyFile + " is not a directory"},
		badInput{[]string{"run", "--data-dir", filepath.Join(keyFile, "sub")}, "data directory"},
		badInput{[]string{"run", "--identity", goodKey}, filepath.Join(keyDir, "node.data") + " is not a directory"})
	badConfig := filepath.Join(t.TempDir(), "peer.toml")
	if err := os.WriteFile(badConfig, []byte("announce = \"soon\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases = append(cases,
		badInput{[]string{"run", "--config", badConfig}, `option "announce"`},
		badInput{[]string{"run", "--config", badConfig + ".missing"}, "--config"},
		badInput{[]string{"config", "init", "--out", badConfig}, "file exists"},
		badInput{[]string{"run", "--identity", keyFile}, "does not hold a libp2p private key"},
		badInput{[]string{"id", "show", "--identity", keyFile}, "does not hold a libp2p private key"},
		badInput{[]string{"id", "show", "--identity", openKey}, "mode 0644"},
		badInput{[]string{"id", "show", "--identity", keyFile + ".missing"}, "does not exist"},
		badInput{[]string{"id", "init", "--out", openKey}, "file exists"},
		badInput{[]string{"id", "init", "--out", ""}, "--out"},
		badInput{[]string{"id", "init", "extra"}, "unknown command"},
		badInput{[]string{"testnet", "--procs", "-n", "2", "--latency", matrix}, "loopback"})
	// A matrix in seconds is refused as milliseconds, and says how to read
	// it; a bad unit, or a unit without a matrix, is a clear error.
	seconds := filepath.Join(t.TempDir(), "seconds.txt")
	if err := os.WriteFile(seconds, []byte("0\t0.01\n0.01\t0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases = append(cases,
		badInput{[]string{"testnet", "-n", "2", "--latency", seconds}, `look like seconds; if they are, begin the file with the line "# unit: s" (or pass --latency-unit s`},
		badInput{[]string{"testnet", "-n", "2", "--latency", seconds, "--latency-unit", "ms"}, "look like seconds"},
		badInput{[]string{"testnet", "-n", "2", "--latency", seconds, "--latency-unit", "us"}, "look like seconds"},
		badInput{[]string{"testnet", "-n", "2", "--latency", matrix, "--latency-unit", "sec"}, `--latency-unit: bad unit "sec": want s, ms or us`},
		badInput{[]string{"testnet", "-n", "2", "--latency-unit", "s"}, "for a --latency file only"},
		badInput{[]string{"bench", "--latency", matrix, "--suite", "election"}, "for the selection suite's simulator half only"},
		badInput{[]string{"bench", "--latency", matrix, "--live"}, "for the selection suite's simulator half only"},
		badInput{[]string{"bench", "--latency", matrix, "--superpeers", "3"}, "--superpeers 3: want 1 to 2"},
		badInput{[]string{"bench", "--superpeers", "3"}, "for a --latency network only"},
		badInput{[]string{"bench", "--latency", matrix, "--quick"}, "--quick: not with --latency"},
		badInput{[]string{"bench", "--latency", seconds}, "look like seconds"},
		// Read in seconds it loads, and the command goes on to refuse
		// --procs.
		badInput{[]string{"testnet", "--procs", "-n", "2", "--latency", seconds, "--latency-unit", "s"}, "loopback"})
	for _, tc := range cases {
		cmd := exec.Command(peerBin, tc.args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Errorf("peer %v: err %v, want exit status 1", tc.args, err)
		}
		msg := strings.TrimSpace(stderr.String())
		if strings.Count(msg, "\n") != 0 || !strings.HasPrefix(msg, "peer: ") || !strings.Contains(msg, tc.want) || strings.Contains(msg, "panic") {
			t.Errorf("peer %v: stderr %q, want one line containing %q", tc.args, msg, tc.want)
		}
	}
}

// `peer testnet --json` converges, and its nodes and clusters agree with
// what anyone can recompute from the peer IDs alone.
func TestTestnetJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 16 libp2p nodes")
	}
	out, err := exec.Command(peerBin, "testnet", "-n", "16", "--superpeers", "4", "--seed", "3", "--json").Output()
	if err != nil {
		t.Fatalf("peer testnet: %v\n%s", err, out)
	}
	var r testnet.Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	if !r.Converged || r.N != 16 || r.K != 2 || r.TargetSuperpeers != 4 || r.Strategy != "dht" || len(r.Nodes) != 16 {
		t.Fatalf("report header: %+v", r)
	}
	ids := make([]peer.ID, len(r.Nodes))
	for i, n := range r.Nodes {
		if ids[i], err = peer.Decode(n.ID); err != nil {
			t.Fatal(err)
		}
	}
	want := dhtselect.Assign(ids, r.K)
	for i, n := range r.Nodes {
		wantRole := "ordinary"
		if want[i].Superpeer == ids[i] {
			wantRole = "superpeer"
		}
		if n.ClusterKey != want[i].ClusterKey.String() || n.Superpeer != want[i].Superpeer.String() || n.Role != wantRole {
			t.Errorf("node %s: %+v, recomputed %+v", n.ID, n, want[i])
		}
	}
	clusters := dhtselect.Clusters(want, r.K)
	if len(r.Clusters) != len(clusters) {
		t.Fatalf("%d clusters reported, %d recomputed", len(r.Clusters), len(clusters))
	}
	for i, c := range clusters {
		if r.Clusters[i].Key != c.Key.String() || r.Clusters[i].Superpeer != c.Superpeer.String() || len(r.Clusters[i].Members) != len(c.Members) {
			t.Errorf("cluster %d: %+v, recomputed %+v", i, r.Clusters[i], c)
		}
	}
}

// A process's JSON log, read as it runs.
type procLog struct {
	mu      sync.Mutex
	id      string
	roles   []string
	sps     []string
	members int      // in the last "cluster changed"
	warns   []string // the messages of WARN records
	addrs   []string // the node's p2p addresses, from "node started"
	api     string   // host:port of its status server, from "status server listening"
	exited  bool     // its stderr closed: the process ended
	tail    []string // the last lines of its stderr
}

// waitStarted waits until the process has logged its ID and, if it runs
// with --http, its status server's address. It fails at once, with the
// end of the process's stderr, if the process exits first (a port taken,
// a bad flag), instead of waiting out waitUntil's bound.
func (p *procLog) waitStarted(t *testing.T, what string, http bool) {
	t.Helper()
	waitUntil(t, what+" to start", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.id != "" && (!http || p.api != "") {
			return true
		}
		if p.exited {
			t.Fatalf("%s exited before it started:\n%s", what, strings.Join(p.tail, "\n"))
		}
		return false
	})
}

// tcpAddr is the process's first TCP address with its /p2p part, to give
// other processes as --bootstrap.
func (p *procLog) tcpAddr(t *testing.T) string {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range p.addrs {
		if strings.Contains(a, "/tcp/") {
			return a
		}
	}
	t.Fatalf("no TCP address among %v", p.addrs)
	return ""
}

func (p *procLog) membersAndWarnings() (int, []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.members, slices.Clone(p.warns)
}

func (p *procLog) last() (id, role, sp string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.roles) > 0 {
		role = p.roles[len(p.roles)-1]
	}
	if len(p.sps) > 0 {
		sp = p.sps[len(p.sps)-1]
	}
	return p.id, role, sp
}

func startRun(t *testing.T, ctx context.Context, args ...string) *procLog {
	t.Helper()
	cmd := exec.CommandContext(ctx, peerBin, append([]string{"run", "--log-format", "json", "--announce", "200ms", "--reevaluate", "200ms"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p := &procLog{}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			if p.tail = append(p.tail, sc.Text()); len(p.tail) > 20 {
				p.tail = p.tail[1:]
			}
			p.mu.Unlock()
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				continue
			}
			p.mu.Lock()
			switch rec["msg"] {
			case "node started":
				p.id, _ = rec["id"].(string)
				s, _ := rec["addrs"].(string)
				p.addrs = strings.Fields(strings.Trim(s, "[]"))
			case "status server listening":
				s, _ := rec["addr"].(string)
				p.api = strings.TrimSuffix(strings.TrimPrefix(s, "http://"), "/")
			case "role changed":
				s, _ := rec["to"].(string)
				p.roles = append(p.roles, s)
			case "superpeer changed":
				s, _ := rec["superpeer"].(string)
				p.sps = append(p.sps, s)
			case "cluster changed":
				m, _ := rec["members"].(float64)
				p.members = int(m)
			}
			if rec["level"] == "WARN" {
				s, _ := rec["msg"].(string)
				p.warns = append(p.warns, s)
			}
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.mu.Lock()
		p.exited = true
		p.mu.Unlock()
	}()
	return p
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Two `peer run` processes on loopback find each other through --bootstrap
// and agree on their roles; a third whose bootstrap peer is unreachable
// warns and keeps running.
func TestTwoProcessesAgree(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a := startRun(t, ctx, "--listen", "/ip4/127.0.0.1/tcp/0", "--superpeers", "1")
	a.waitStarted(t, "process A", false)
	b := startRun(t, ctx, "--listen", "/ip4/127.0.0.1/tcp/0,/ip4/127.0.0.1/udp/0/quic-v1", "--superpeers", "1",
		"--bootstrap", a.tcpAddr(t))
	b.waitStarted(t, "process B", false)
	aID, _, _ := a.last()
	bID, _, _ := b.last()
	ids := []peer.ID{peer.ID(""), peer.ID("")}
	var err error
	if ids[0], err = peer.Decode(aID); err != nil {
		t.Fatal(err)
	}
	if ids[1], err = peer.Decode(bID); err != nil {
		t.Fatal(err)
	}
	want := dhtselect.Assign(ids, 0)[0].Superpeer.String() // k = 0: one cluster
	roleOf := func(id string) string {
		if id == want {
			return "superpeer"
		}
		return "ordinary"
	}
	waitUntil(t, "both processes to agree on the superpeer "+want, func() bool {
		_, ra, sa := a.last()
		_, rb, sb := b.last()
		return sa == want && sb == want && ra == roleOf(aID) && rb == roleOf(bID)
	})
}

func TestUnreachableBootstrapWarns(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// A valid peer ID at a port where nobody listens.
	boot := fmt.Sprintf("/ip4/127.0.0.1/tcp/%d/p2p/12D3KooWD3eckifWpRn9wQpMG9R9hX3sD158z7EqHWmweQAJU5SA", freePort(t))
	cmd := exec.CommandContext(ctx, peerBin, "run", "--listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", boot)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(stderr)
	warned := false
	for !warned && sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "panic") {
			t.Fatalf("panic: %s", line)
		}
		warned = strings.Contains(line, "WARN") && strings.Contains(line, "bootstrap peer unreachable, will retry")
	}
	if !warned {
		t.Fatal("stderr ended without the warning about the unreachable bootstrap peer (did the process exit?)")
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute) // a bound against hangs only
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
