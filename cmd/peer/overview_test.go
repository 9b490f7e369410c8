package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"html"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay"
	"github.com/superpeer/superpeer/testnet"
)

// screenshots, when set, is the directory TestOverlayPage saves the page's
// PNGs in (make screenshots).
var screenshots = flag.String("screenshots", "", "TestOverlayPage: save screenshots of the overlay page in this directory")

// pageLayout is window.overlayLayout, what the page says it drew.
type pageLayout struct {
	W, H  float64
	Model []struct {
		ID, State, Superpeer string
		Size                 int
	}
	Clusters []struct {
		ID, State string
		Box       pageBox
	}
	Labels []struct {
		ID   string
		Box  pageBox
		Text pageBox
	}
	Hidden   []string
	Timeline []overlay.TimelineEntry
}

type pageBox struct{ X, Y, W, H float64 }

func (b pageBox) intersects(c pageBox) bool {
	return b.X < c.X+c.W && c.X < b.X+b.W && b.Y < c.Y+c.H && c.Y < b.Y+b.H
}

func (b pageBox) contains(c pageBox) bool {
	const tol = 0.5
	return c.X >= b.X-tol && c.Y >= b.Y-tol && c.X+c.W <= b.X+b.W+tol && c.Y+c.H <= b.Y+b.H+tol
}

var layoutRE = regexp.MustCompile(`(?s)<pre id="overlay-layout"[^>]*>(.*?)</pre>`)

// loadLayout loads the page at url in headless Chromium and returns what
// it drew (after 1.5 s of the page's time: its first fetch is enough).
func loadLayout(t *testing.T, chromium, url string) pageLayout {
	t.Helper()
	dom := dumpDOM(t, chromium, url, 1500*time.Millisecond)
	m := layoutRE.FindStringSubmatch(dom)
	var l pageLayout
	if m == nil || json.Unmarshal([]byte(html.UnescapeString(m[1])), &l) != nil {
		t.Fatalf("the page at %s exposes no layout\n%s", url, dom)
	}
	return l
}

// checkDrawn fails the test unless the page drew every cluster of its
// model, in its state, and no two of its labels intersect.
func checkDrawn(t *testing.T, l pageLayout) {
	t.Helper()
	if len(l.Model) == 0 {
		t.Fatal("the page's model has no cluster")
	}
	drawn := map[string]string{}
	for _, c := range l.Clusters {
		drawn[c.ID] = c.State
		if c.Box.W <= 0 || c.Box.X < 0 || c.Box.Y < 0 || c.Box.X+c.Box.W > l.W || c.Box.Y+c.Box.H > l.H {
			t.Errorf("cluster %s drawn at %+v, not inside the %vx%v map", c.ID, c.Box, l.W, l.H)
		}
	}
	for _, c := range l.Model {
		if st, ok := drawn[c.ID]; !ok || st != c.State {
			t.Errorf("cluster %s (%s) drawn: %v, as %q", c.ID, c.State, ok, st)
		}
	}
	if len(l.Hidden) > 0 {
		t.Errorf("labels with no room: %v", l.Hidden)
	}
	for i, a := range l.Labels {
		if !a.Box.contains(a.Text) {
			t.Errorf("label %s: its text %+v overflows its box %+v", a.ID, a.Text, a.Box)
		}
		for _, b := range l.Labels[i+1:] {
			if a.Box.intersects(b.Box) {
				t.Errorf("labels %s %+v and %s %+v intersect", a.ID, a.Box, b.ID, b.Box)
			}
		}
	}
}

// screenshot saves the page at url as name.png in the -screenshots
// directory, if one was given.
func screenshot(t *testing.T, chromium, url, name string) {
	t.Helper()
	if *screenshots == "" {
		return
	}
	dir, err := filepath.Abs(*screenshots)
	if err == nil {
		err = os.MkdirAll(dir, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name+".png")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound against hangs only
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--no-first-run", "--hide-scrollbars", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=3000",
		"--window-size=1560,1180", "--timeout=30000", "--screenshot="+path, url)
	cmd.WaitDelay = 10 * time.Second // its helpers may hold the output open
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium --screenshot %s: %v\n%s", url, err, out)
	}
	t.Logf("saved %s", path)
}

// The page of `peer testnet --http` for a 32-node testnet with bully
// elections, in headless Chromium: every cluster is drawn and no two
// labels intersect; when the superpeer of the largest cluster crashes,
// the page draws its cluster without a live superpeer (electing or no
// superpeer), and its time line shows the cluster turn so at the crash
// and back to stable within the failover time.
func TestOverlayPage(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a 32-node testnet and headless Chromium; it runs in the full (not -short) pass")
	}
	chromium := findChromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a bound against hangs only
	defer cancel()
	cfg := testnet.Config{N: 32, Target: dhtselect.Target{Superpeers: 4}, Seed: 1, Election: "bully"}
	announce := testnet.DefaultAnnounceInterval(cfg.N, cfg.Strategy) // what the testnet gives its nodes
	tn, err := testnet.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tn.Close()
	web, err := listenOverview("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	web.serve(tn.Overview)
	defer web.close()
	converged, err := tn.WaitConverged(ctx, tn.Started())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("converged in %v", converged.Round(time.Millisecond))

	// Converged: the four clusters of the brute-force answer, all stable
	// (bully may start a needless election now and then: wait for a
	// moment when none runs).
	k, as := tn.Expected()
	var want []string
	for _, c := range dhtselect.Clusters(as, k) {
		want = append(want, overlay.DHTClusterID(k, c.Key))
	}
	slices.Sort(want)
	allStable := func(cs []overlay.ClusterView) bool {
		var ids []string
		for _, c := range cs {
			if c.State != overlay.ClusterStable {
				return false
			}
			ids = append(ids, c.ID)
		}
		slices.Sort(ids)
		return slices.Equal(ids, want)
	}
	var l pageLayout
	var stable overlay.Overview
	waitCtx(t, ctx, "the page to draw the four clusters, all stable", func() bool {
		if stable = tn.Overview(); !allStable(stable.Clusters) {
			return false
		}
		l = loadLayout(t, chromium, web.url())
		cs := make([]overlay.ClusterView, len(l.Model))
		for i, c := range l.Model {
			cs[i] = overlay.ClusterView{ID: c.ID, State: c.State}
		}
		return allStable(cs)
	})
	checkDrawn(t, l)
	if len(l.Labels) != len(want) {
		t.Errorf("%d labels, want one per cluster (%d)", len(l.Labels), len(want))
	}
	// The screenshot: the stable model, served frozen (bully may start a
	// needless election by the time Chromium looks).
	frozen := func(o overlay.Overview) *overviewWeb {
		w, err := listenOverview("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		w.serve(func() overlay.Overview { return o })
		t.Cleanup(func() { _ = w.close() })
		return w
	}
	screenshot(t, chromium, frozen(stable).url(), "overlay-stable")

	// The superpeer of the largest cluster crashes.
	var victim peer.ID
	var cluster string
	var detection time.Duration
	best := 0
	for _, c := range dhtselect.Clusters(as, k) {
		if len(c.Members) > best {
			best, victim, cluster = len(c.Members), c.Superpeer, overlay.DHTClusterID(k, c.Key)
		}
	}
	for _, n := range tn.Nodes() {
		detection = max(detection, n.ElectionStats().Timeout)
	}
	// What the page draws while the cluster has no live superpeer: the
	// model as it was then, served frozen (the live one changes within a
	// second). It is watched from before the crash: the stop itself takes
	// a while, and the election may be over when it returns. The watch
	// goes on until the cluster is stable again, as an open page fetches
	// the model: the time line notes a change when a model is taken, and
	// while the test ran Chromium on the frozen model (seconds on a
	// loaded machine) nobody took one, and the return to stable was
	// noted late.
	var during overlay.Overview
	watching := make(chan struct{})
	seen := make(chan struct{})    // during is final
	watched := make(chan struct{}) // the cluster is stable again (or ctx ended)
	go func() {
		defer close(watched)
		first, pictured := true, false
		picture := func() {
			if !pictured {
				pictured = true
				close(seen)
			}
		}
		defer picture()
		for {
			o := tn.Overview()
			if first {
				close(watching)
				first = false
			}
			i := slices.IndexFunc(o.Clusters, func(c overlay.ClusterView) bool { return c.ID == cluster })
			switch {
			case i < 0 || slices.ContainsFunc(o.Clusters[i].Members, func(m overlay.MemberView) bool { return m.ID == victim.String() }):
				// not crashed yet
			case o.Clusters[i].State == overlay.ClusterStable:
				return // over
			case pictured:
			case o.Clusters[i].State == overlay.ClusterElecting:
				during = o
				picture() // the picture wanted
			default:
				during = o // no superpeer: kept unless one electing comes
			}
			if ctx.Err() != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	<-watching
	if err := tn.Stop(victim); err != nil {
		t.Fatal(err)
	}
	<-seen
	if during.Clusters != nil {
		l := loadLayout(t, chromium, frozen(during).url())
		checkDrawn(t, l)
		i := slices.IndexFunc(l.Clusters, func(c struct {
			ID, State string
			Box       pageBox
		}) bool {
			return c.ID == cluster
		})
		if i < 0 || l.Clusters[i].State == overlay.ClusterStable {
			t.Errorf("right after the crash the page drew cluster %s as %+v, want electing or no superpeer", cluster, l.Clusters)
		}
		screenshot(t, chromium, frozen(during).url(), "overlay-electing")
	} else {
		t.Log("the cluster was stable again before the test could look")
	}

	// Back to stable: the page's own time line says when.
	<-watched
	if ctx.Err() != nil {
		t.Fatal("timed out waiting for the crashed superpeer's cluster to be stable again")
	}
	l = loadLayout(t, chromium, web.url())
	var killed, left, back time.Time
	var via string
	for _, e := range l.Timeline {
		switch {
		case e.Kind == "fault" && e.Peer == victim.String():
			killed = e.Time
		case killed.IsZero() || e.Kind != "state" || e.Cluster != cluster:
		case left.IsZero() && (e.To == overlay.ClusterElecting || e.To == overlay.ClusterNoSuperpeer):
			left, via = e.Time, e.To
		case !left.IsZero() && back.IsZero() && e.To == overlay.ClusterStable:
			back = e.Time
		}
	}
	if killed.IsZero() || left.IsZero() || back.IsZero() {
		t.Fatalf("the page's time line does not show the crash (%v), cluster %s leaving stable (%v) and coming back (%v):\n%+v",
			killed, cluster, left, back, l.Timeline)
	}
	for _, e := range l.Timeline {
		if e.Cluster == cluster || e.Kind == "fault" {
			t.Logf("%s %s", e.Time.Format("15:04:05.000"), e.Text)
		}
	}
	// The failover time, from the configuration: a member notices the
	// crash when its connection closes, or at the latest after one
	// detection timeout T (the largest of any node, before or after: it
	// grows with the RTTs measured), and looks its successor up at once.
	// It registers with the successor at once too, and again one announce
	// interval later if the successor refused it for not serving yet:
	// until it is in the successor's registrations it is not in its
	// election, whose COORDINATOR and heartbeats do not reach it, and it
	// stays a candidate (the page's "electing"). Then bully takes at most
	// a candidate's wait for a COORDINATOR (2T) and an answer's (T). So T
	// + announce + 3T. The bound has no room for a member that registers
	// with the crashed superpeer instead: a successor that refused a
	// member before it served gave the member a hint naming its own
	// superpeer, the crashed one, and the node machine kept that hint for
	// its three announce intervals (overlay/node Registrar); the members
	// so misled stayed candidates, and the cluster came back stable 13 to
	// 16 s after the crash while the nodes named the successor within
	// 0.2 s. That is the node's fault, not the page's. On a loaded machine
	// bully also starts needless elections (a follower that misses the
	// leader's heartbeats): a failover cannot be asked to be quicker than
	// the longest such election the page showed before the crash, which
	// the bound adds (on two cores at a load average of 17, needless
	// elections lasted up to 30 s; on an idle machine under 2 s).
	for _, n := range tn.Nodes() {
		detection = max(detection, n.ElectionStats().Timeout)
	}
	noise := needless(l.Timeline, killed)
	bound := 4*detection + announce + noise
	failover := back.Sub(killed)
	t.Logf("superpeer %s crashed: its cluster of %d %s %v after, stable again %v after (bound %v: detection timeout %v, announce interval %v, needless elections up to %v)",
		victim.ShortString(), best, via, left.Sub(killed).Round(time.Millisecond), failover.Round(time.Millisecond), bound, detection, announce, noise)
	if failover > bound {
		t.Errorf("cluster %s stable again %v after the crash, more than the failover bound %v", cluster, failover, bound)
	}
	checkDrawn(t, l)
}

// waitCtx waits until cond holds, or fails the test when ctx ends first
// (a bound against hangs: on a loaded machine bully's needless elections
// may keep a cluster from being stable for a minute).
func waitCtx(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// needless is the longest time a cluster spent out of the stable state in
// the time line before the crash at killed (bully's needless elections).
func needless(tl []overlay.TimelineEntry, killed time.Time) time.Duration {
	left := map[string]time.Time{}
	var longest time.Duration
	for _, e := range tl {
		if !e.Time.Before(killed) {
			break
		}
		if e.Kind != "state" {
			continue
		}
		if e.To == overlay.ClusterStable {
			if t0, ok := left[e.Cluster]; ok {
				longest = max(longest, e.Time.Sub(t0))
				delete(left, e.Cluster)
			}
		} else if _, ok := left[e.Cluster]; !ok {
			left[e.Cluster] = e.Time
		}
	}
	return longest
}

// `peer testnet --http` prints the page's address, serves the overview
// while the testnet runs, keeps serving after the report, and ends with
// status 0 on an interrupt.
func TestTestnetHTTP(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a testnet")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a bound against hangs only
	defer cancel()
	cmd := exec.CommandContext(ctx, peerBin, "testnet", "-n", "6", "--superpeers", "2", "--http", "127.0.0.1:0", "--quiet")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	sc := bufio.NewScanner(stderr)
	var url string
	lingering := false
	for !lingering && sc.Scan() {
		line := sc.Text()
		rest, ok := strings.CutPrefix(line, "overlay page: ")
		if !ok {
			continue
		}
		if url == "" {
			url = strings.Fields(rest)[0]
			o, err := getOverview(url)
			if err != nil || o.Source != "testnet" {
				t.Errorf("GET %soverview while the testnet runs: %v, %+v", url, err, o)
			}
		}
		lingering = strings.Contains(rest, "Ctrl-C")
	}
	if !lingering {
		t.Fatal("no line saying the page stays up")
	}
	o, err := getOverview(url)
	if err != nil || o.Peers != 6 || len(o.Clusters) != 2 {
		t.Errorf("GET %soverview after the report: %v, %d peers, %d clusters; want 6 and 2", url, err, o.Peers, len(o.Clusters))
	}
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	go func() {
		for sc.Scan() {
		}
	}()
	if err := cmd.Wait(); err != nil {
		t.Errorf("after an interrupt: %v, want exit status 0", err)
	}
	if !strings.Contains(stdout.String(), "converged in") {
		t.Errorf("no report on standard output:\n%s", stdout.String())
	}
}

func getOverview(url string) (overlay.Overview, error) {
	var o overlay.Overview
	c := http.Client{Timeout: 10 * time.Second}
	r, err := c.Get(url + "overview")
	if err != nil {
		return o, err
	}
	defer r.Body.Close()
	if r.StatusCode != http.StatusOK {
		return o, fmt.Errorf("%s", r.Status)
	}
	return o, json.NewDecoder(r.Body).Decode(&o)
}
