package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay"
	"github.com/superpeer/superpeer/testnet"
)

// runTestnet runs `peer testnet ... --json` and returns its report; the
// run must exit 0.
func runTestnet(t *testing.T, args ...string) testnet.Report {
	t.Helper()
	cmd := exec.Command(peerBin, append([]string{"testnet", "--json"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("peer testnet %v: %v\n%s\n%s", args, err, stderr.String(), out)
	}
	var r testnet.Report
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("bad JSON: %v\n%s", err, out)
	}
	return r
}

// noNodeProcessesLeft fails when a `peer run --control` child of the
// testnet outlived it.
func noNodeProcessesLeft(t *testing.T) {
	t.Helper()
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.HasPrefix(string(b), peerBin+"\x00run\x00--control") {
			t.Errorf("node process %s outlived its testnet", filepath.Dir(p))
		}
	}
}

// Every node its own `peer run` process on loopback: the overlay converges
// on the brute-force answer, a superpeer killed with SIGKILL is replaced by
// the right successor (the next closest peer to its cluster key, which the
// bully election and the DHT lookup both name), and no peer is orphaned;
// then the same with SIGTERM, which hands over faster.
func TestProcsKillSuperpeer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 16 node processes")
	}
	r := runTestnet(t, "--procs", "-n", "16", "--superpeers", "4", "--seed", "3",
		"--election", "bully", "--scenario", "kill-superpeer")
	sc := r.Scenario
	if !r.Converged || r.N != 15 || sc == nil || len(sc.Faults) != 1 {
		t.Fatalf("report: converged %v, %d nodes, scenario %+v", r.Converged, r.N, sc)
	}
	if sc.Orphans != 0 || sc.FailoverMS.N != 1 || sc.Messages["HEARTBEAT"] == 0 || sc.Messages["COORDINATOR"] == 0 {
		t.Errorf("scenario: %+v", sc)
	}
	// The successor: recompute the clusters of the 15 live peers.
	ids := make([]peer.ID, len(r.Nodes))
	for i, n := range r.Nodes {
		ids[i], _ = peer.Decode(n.ID)
	}
	want := dhtselect.Assign(ids, r.K)
	for i, n := range r.Nodes {
		if n.Superpeer != want[i].Superpeer.String() {
			t.Errorf("node %s names superpeer %s, want %s", n.ID, n.Superpeer, want[i].Superpeer)
		}
	}
	t.Logf("failover %.0f ms, detection timeout %.0f ms, coverage %.4f, messages %v",
		sc.FailoverMS.Median, sc.DetectionTimeoutMS, sc.Coverage, sc.Messages)
	noNodeProcessesLeft(t)

	// The same superpeer shut down with SIGTERM: peer run closes its node,
	// which says goodbye, so its peers neither wait for a failure detector
	// nor query it in their lookups. The hand-over takes less than one
	// failure-detection timeout, and less than the crash's failover (which
	// waits out a lookup query to the dead peer).
	g := runTestnet(t, "--procs", "-n", "16", "--superpeers", "4", "--seed", "3",
		"--election", "bully", "--scenario", "kill-superpeer", "--graceful").Scenario
	if g == nil || len(g.Faults) != 1 || !strings.HasPrefix(g.Faults[0], "shut down superpeer ") || g.FailoverMS.N != 1 || g.Orphans != 0 {
		t.Fatalf("graceful scenario: %+v", g)
	}
	t.Logf("SIGTERM: failover %.0f ms; SIGKILL: %.0f ms; detection timeout %.0f ms", g.FailoverMS.Median, sc.FailoverMS.Median, g.DetectionTimeoutMS)
	if g.FailoverMS.Max >= g.DetectionTimeoutMS || g.FailoverMS.Median >= sc.FailoverMS.Median {
		t.Errorf("SIGTERM hand-over %.0f ms (max %.0f), want under the detection timeout %.0f ms and the SIGKILL failover %.0f ms",
			g.FailoverMS.Median, g.FailoverMS.Max, g.DetectionTimeoutMS, sc.FailoverMS.Median)
	}
	noNodeProcessesLeft(t)
}

// A partition of node processes, made by their connection gaters: with
// --quorum no two peers claim one cluster, and the minority side has no
// superpeer by the time the cut heals.
func TestProcsPartitionQuorum(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 16 node processes")
	}
	r := runTestnet(t, "--procs", "-n", "16", "--superpeers", "2", "--seed", "3",
		"--election", "bully", "--quorum", "--scenario", "partition", "--duration", "20s")
	sc := r.Scenario
	if !r.Converged || sc == nil || len(sc.Faults) != 2 {
		t.Fatalf("report: converged %v, scenario %+v", r.Converged, sc)
	}
	if sc.SplitBrainMS != 0 || sc.MinorityAtHeal != 0 || sc.Orphans != 0 {
		t.Errorf("scenario: split brain %.0f ms, %d minority superpeers at the heal, %d orphans",
			sc.SplitBrainMS, sc.MinorityAtHeal, sc.Orphans)
	}
	t.Logf("minority superpeer %.0f ms, detection timeout %.0f ms, coverage %.4f",
		sc.MinoritySuperpeerMS, sc.DetectionTimeoutMS, sc.Coverage)
	noNodeProcessesLeft(t)
}

// peer id init writes a key file (mode 0600) and prints its peer ID; peer
// id show prints the same; peer run with identity in its config file runs
// under it.
func TestRunIdentity(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	out, err := exec.Command(peerBin, "id", "init", "--out", path).Output()
	if err != nil {
		t.Fatalf("peer id init: %v", err)
	}
	want, err := peer.Decode(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("peer id init printed %q: %v", out, err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %v, want 0600", st.Mode().Perm())
	}
	k, err := overlay.LoadIdentity(path)
	if err != nil {
		t.Fatal(err)
	}
	if k.Type() != crypto.Ed25519 {
		t.Errorf("key type %v, want Ed25519", k.Type())
	}
	if id, _ := peer.IDFromPrivateKey(k); id != want {
		t.Fatalf("peer id init printed %s, the key gives %s", want, id)
	}
	if out, err := exec.Command(peerBin, "id", "show", "--identity", path).Output(); err != nil || strings.TrimSpace(string(out)) != want.String() {
		t.Errorf("peer id show: %q, %v; want %s", out, err, want)
	}
	ctx := t.Context()
	// The identity and listen address come from a config file.
	conf := filepath.Join(t.TempDir(), "peer.toml")
	if err := os.WriteFile(conf, fmt.Appendf(nil, "identity = %q\nlisten = [\"/ip4/127.0.0.1/tcp/0\"]\n", path), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startRun(t, ctx, "--config", conf)
	p.waitStarted(t, "the process", false)
	if id, _, _ := p.last(); id != want.String() {
		t.Errorf("peer ID %s, want %s from the key file", id, want)
	}
}

// Three peer run processes with the same --psk form an overlay on loopback;
// a fourth without the key cannot connect to them (it never gets a role),
// and a fifth with the key but another --network connects and does not join
// (it is alone in its overlay, and theirs stays at three).
func TestPrivateSwarmProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five node processes")
	}
	ctx := t.Context()
	key := filepath.Join(t.TempDir(), "swarm.key")
	if out, err := exec.Command(peerBin, "psk", "init", "--out", key).CombinedOutput(); err != nil {
		t.Fatalf("peer psk init: %v\n%s", err, out)
	}
	priv := []string{"--psk", key, "--network", "priv", "--superpeers", "1"}
	a := startRun(t, ctx, append([]string{"--listen", "/ip4/127.0.0.1/tcp/0"}, priv...)...)
	a.waitStarted(t, "process A", false)
	boot := a.tcpAddr(t)
	procs := []*procLog{a}
	for range 2 {
		procs = append(procs, startRun(t, ctx, append([]string{"--listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", boot}, priv...)...))
	}
	ids := make([]peer.ID, len(procs))
	waitUntil(t, "the three private processes to start", func() bool {
		for i, p := range procs {
			s, _, _ := p.last()
			var err error
			if ids[i], err = peer.Decode(s); err != nil {
				return false
			}
		}
		return true
	})
	want := dhtselect.Assign(ids, 0)[0].Superpeer.String()
	agreed := func() bool {
		for _, p := range procs {
			_, _, sp := p.last()
			if m, _ := p.membersAndWarnings(); sp != want || m != 3 {
				return false
			}
		}
		return true
	}
	waitUntil(t, "the three to form one cluster under "+want, agreed)

	keyless := startRun(t, ctx, "--listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", boot, "--network", "priv", "--superpeers", "1")
	waitUntil(t, "the keyless process to find the bootstrap peer unreachable", func() bool {
		_, warns := keyless.membersAndWarnings()
		return slices.Contains(warns, "bootstrap peer unreachable, will retry")
	})
	other := startRun(t, ctx, "--listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", boot, "--psk", key, "--network", "other", "--superpeers", "1")
	// A role needs a reached bootstrap peer (see overlay's mayJoin): the
	// other network's process connected to A.
	waitUntil(t, "the other network's process to take a role", func() bool {
		id, role, sp := other.last()
		m, _ := other.membersAndWarnings()
		return role == "superpeer" && sp == id && m == 1
	})
	// Twenty of its announce intervals later, the private overlay is as it was.
	time.Sleep(4 * time.Second)
	if !agreed() {
		t.Error("the private overlay changed when another network's peer connected")
	}
	if _, role, _ := keyless.last(); role != "" {
		t.Errorf("the keyless process took the role %q: it reached a private peer", role)
	}
	if m, _ := other.membersAndWarnings(); m != 1 {
		t.Errorf("the other network's process sees %d members, want itself alone", m)
	}
}
