package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay"
)

// `peer run --http` serves the node's status, and `peer status --api`
// prints its ID and role, or with --json the server's JSON.
func TestStatusCommand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p := startRun(t, ctx, "--listen", "/ip4/127.0.0.1/tcp/0", "--superpeers", "1", "--election", "bully", "--http", "127.0.0.1:0")
	p.waitStarted(t, "the node", true)
	api := p.api
	var id string
	waitUntil(t, "the node to become the superpeer of its one-node network", func() bool {
		var role string
		id, role, _ = p.last()
		return role == "superpeer"
	})
	var st overlay.Status
	waitUntil(t, "the status server to show the role and the election", func() bool {
		out, err := exec.Command(peerBin, "status", "--api", api, "--json").Output()
		return err == nil && json.Unmarshal(out, &st) == nil && st.Role == overlay.RoleSuperpeer &&
			st.Election != nil && st.Election.Last != nil
	})
	if st.ID != id || st.Superpeer.ID != id || len(st.Members) != 1 || st.Election.Algorithm != "bully" {
		t.Errorf("peer status --json: %+v", st)
	}
	out, err := exec.Command(peerBin, "status", "--api", api).CombinedOutput()
	if err != nil {
		t.Fatalf("peer status: %v\n%s", err, out)
	}
	fields := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if k, v, ok := strings.Cut(line, "  "); ok {
			fields[k] = strings.TrimSpace(v)
		}
	}
	for k, want := range map[string]string{
		"ID": id, "role": "superpeer", "superpeer": id, "members": "1: " + id, "term": "0",
	} {
		if fields[k] != want {
			t.Errorf("peer status: %s %q, want %q\n%s", k, fields[k], want, out)
		}
	}
	if !strings.HasPrefix(fields["last election"], time.Now().UTC().Format("2006-01-02")) {
		t.Errorf("peer status: last election %q\n%s", fields["last election"], out)
	}

	// A port already taken is a one-line error, exit status 1.
	cmd := exec.Command(peerBin, "run", "--listen", "/ip4/127.0.0.1/tcp/0", "--http", api)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	msg := strings.TrimSpace(stderr.String())
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || strings.Contains(msg, "\n") ||
		!strings.Contains(msg, "--http") || !strings.Contains(msg, "address already in use") {
		t.Errorf("peer run --http on a taken port: %v, stderr %q; want exit status 1 and one line", err, msg)
	}
}

// The page on / of `peer run --http`, in headless Chromium: it shows every
// peer the node knows (an element with data-peer each) and the node's
// role, refreshes itself, and when the superpeer stops, shows the node's
// new role.
func TestStatusPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("runs headless Chromium; it runs in the full (not -short) pass")
	}
	chromium := findChromium(t)
	ctxA, stopA := context.WithCancel(context.Background())
	defer stopA()
	ctxB, stopB := context.WithCancel(context.Background())
	defer stopB()
	// Port 0 everywhere: each process logs the addresses it got. (Ports
	// picked free in advance could be taken by the time a process binds
	// them, by the other test packages' connections.)
	a := startRun(t, ctxA, "--listen", "/ip4/127.0.0.1/tcp/0", "--superpeers", "1", "--http", "127.0.0.1:0")
	a.waitStarted(t, "process A", true)
	b := startRun(t, ctxB, "--listen", "/ip4/127.0.0.1/tcp/0", "--superpeers", "1", "--http", "127.0.0.1:0",
		"--bootstrap", a.tcpAddr(t))
	b.waitStarted(t, "process B", true)
	aID, _, _ := a.last()
	bID, _, _ := b.last()
	apiA, apiB := a.api, b.api

	// The ordinary node's page; then its superpeer stops.
	ids := make([]peer.ID, 2)
	for i, s := range []string{aID, bID} {
		var err error
		if ids[i], err = peer.Decode(s); err != nil {
			t.Fatal(err)
		}
	}
	sp := dhtselect.Assign(ids, 0)[0].Superpeer.String()
	ordinary, api, stopSuperpeer := bID, apiB, stopA
	if sp == bID {
		ordinary, api, stopSuperpeer = aID, apiA, stopB
	}
	waitUntil(t, "the ordinary node's status to show both peers", func() bool {
		st, ok := getStatus(api)
		return ok && st.Role == overlay.RoleOrdinary && st.Superpeer.ID == sp && len(st.Peers) == 2
	})
	dom := dumpDOM(t, chromium, "http://"+api+"/", 5*time.Second)
	if role := roleText(dom); role != "ordinary" {
		t.Errorf("page role %q, want ordinary\n%s", role, dom)
	}
	for _, id := range []string{aID, bID} {
		if !strings.Contains(dom, `data-peer="`+id+`"`) {
			t.Errorf("page has no element with data-peer=%q\n%s", id, dom)
		}
	}
	if n := updates(dom); n < 2 {
		t.Errorf("the page fetched the status %d times in 5 s of its time, want every second\n%s", n, dom)
	}

	stopSuperpeer()
	waitUntil(t, "the ordinary node to become the superpeer of its own cluster", func() bool {
		st, ok := getStatus(api)
		return ok && st.Role == overlay.RoleSuperpeer
	})
	dom = dumpDOM(t, chromium, "http://"+api+"/", 5*time.Second)
	if role := roleText(dom); role != "superpeer" {
		t.Errorf("page role %q after the superpeer stopped, want superpeer\n%s", role, dom)
	}
	if !strings.Contains(dom, `data-peer="`+ordinary+`"`) {
		t.Errorf("page has no element with data-peer=%q\n%s", ordinary, dom)
	}
}

// findChromium returns Debian's chromium, or fails the test: the browser
// test must not pass silently where the browser is missing.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-headless-shell", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed: run `make deps` (it installs Debian's chromium package), then the tests again")
	return ""
}

// dumpDOM loads url in headless Chromium, lets the page run for budget
// of virtual time, and returns its DOM.
func dumpDOM(t *testing.T, chromium, url string, budget time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound against hangs only
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--user-data-dir="+t.TempDir(), fmt.Sprintf("--virtual-time-budget=%d", budget.Milliseconds()), "--dump-dom", url)
	cmd.WaitDelay = 10 * time.Second // its helpers may hold the output open
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v\n%s", url, err, stderr.String())
	}
	return string(out)
}

var (
	roleRE    = regexp.MustCompile(`id="role"[^>]*>([^<]*)<`)
	updatedRE = regexp.MustCompile(`id="updated"[^>]*data-count="(\d+)"|data-count="(\d+)"[^>]*id="updated"`)
)

// roleText is the text of the page's element with id="role".
func roleText(dom string) string {
	if m := roleRE.FindStringSubmatch(dom); m != nil {
		return strings.TrimSpace(m[1])
	}
	return ""
}

// updates is how many times the page says it fetched the status.
func updates(dom string) int {
	m := updatedRE.FindStringSubmatch(dom)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1] + m[2])
	return n
}

// getStatus fetches a node's /status.
func getStatus(api string) (overlay.Status, bool) {
	var st overlay.Status
	c := http.Client{Timeout: 5 * time.Second}
	r, err := c.Get("http://" + api + "/status")
	if err != nil {
		return st, false
	}
	defer r.Body.Close()
	return st, r.StatusCode == http.StatusOK && json.NewDecoder(r.Body).Decode(&st) == nil
}
