package overlay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	ma "github.com/multiformats/go-multiaddr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/superpeer/superpeer/dhtselect"
)

// dashboardFile is the Grafana dashboard of the node's metrics.
const dashboardFile = "../docs/grafana/superpeer.json"

// The Grafana dashboard cannot drift from the code: every metric name its
// queries use (panels and variables) is one a live node exports on
// /metrics or the node's collector describes (some appear only in some
// states: with an election, with the geometric strategy, after a refusal),
// every function is PromQL's, and every metric of the node's own
// (superpeer_*) has a panel.
func TestGrafanaDashboard(t *testing.T) {
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	queries := dashboardQueries(dash)
	if len(queries) < 20 {
		t.Fatalf("%s: %d queries found, want the whole dashboard's", dashboardFile, len(queries))
	}

	n, err := New(context.Background(), WithListenAddrs(ma.StringCast("/ip4/127.0.0.1/tcp/0")), WithLogger(quiet),
		WithTarget(dhtselect.Target{Superpeers: 1}), WithElection("bully", false))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	srv, err := NewStatusServer(n)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	web := httptest.NewServer(srv)
	defer web.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(httpGet(t, web.URL+"/metrics", "text/plain"))))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v", err)
	}
	exported := map[string]bool{}
	for name, f := range fams {
		exported[name] = true
		switch f.GetType() { // the series a query names
		case dto.MetricType_SUMMARY:
			exported[name+"_sum"], exported[name+"_count"] = true, true
		case dto.MetricType_HISTOGRAM:
			exported[name+"_sum"], exported[name+"_count"], exported[name+"_bucket"] = true, true, true
		}
	}
	own := describedMetrics(t)
	for _, name := range own {
		exported[name] = true
	}

	used := map[string]bool{}
	for _, err := range checkQueries(queries, exported, used) {
		t.Error(err)
	}
	for _, name := range own {
		if !used[name] {
			t.Errorf("%s has no panel for %s", dashboardFile, name)
		}
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if !used[name] {
			t.Errorf("%s has no panel for %s (the process)", dashboardFile, name)
		}
	}

	// The check can fail: a misspelt metric, an unknown function, a query
	// without a metric.
	bad := []string{`sum(rate(superpeer_lookup_total[5m]))`, `sums(superpeer_lookups_total)`, `vector(1)`}
	if errs := checkQueries(bad, exported, map[string]bool{}); len(errs) != len(bad) {
		t.Errorf("bad queries %q: errors %v, want one each", bad, errs)
	}
}

// describedMetrics returns the names of the metrics the node's collector
// describes, all of them, whatever the node's state.
func describedMetrics(t *testing.T) []string {
	t.Helper()
	ch := make(chan *prometheus.Desc)
	go func() { (&collector{}).Describe(ch); close(ch) }()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	var out []string
	for d := range ch {
		m := fq.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in the descriptor %s", d)
		}
		out = append(out, m[1])
	}
	if len(out) < 10 || !slices.Contains(out, "superpeer_role") {
		t.Fatalf("the collector describes %v", out)
	}
	return out
}

// dashboardQueries returns every PromQL expression of a dashboard: the
// targets' expr and the query variables' queries.
func dashboardQueries(v any) []string {
	var out []string
	switch v := v.(type) {
	case map[string]any:
		if e, ok := v["expr"].(string); ok {
			out = append(out, e)
		}
		if v["type"] == "query" {
			switch q := v["query"].(type) {
			case string:
				out = append(out, q)
			case map[string]any:
				if s, ok := q["query"].(string); ok {
					out = append(out, s)
				}
			}
		}
		for _, x := range v {
			out = append(out, dashboardQueries(x)...)
		}
	case []any:
		for _, x := range v {
			out = append(out, dashboardQueries(x)...)
		}
	}
	return out
}

// checkQueries checks that every query names at least one metric, all of
// them exported, and only PromQL's functions; it marks the names in used.
func checkQueries(queries []string, exported, used map[string]bool) []error {
	var errs []error
	for _, q := range queries {
		names, funcs := promqlNames(q)
		var bad []string
		for _, f := range funcs {
			if !promqlFuncs[f] {
				bad = append(bad, "unknown function "+f)
			}
		}
		for _, name := range names {
			used[name] = true
			if !exported[name] {
				bad = append(bad, "metric "+name+" is not exported")
			}
		}
		if len(names) == 0 {
			bad = append(bad, "no metric")
		}
		if len(bad) > 0 {
			errs = append(errs, fmt.Errorf("query %q: %s", q, strings.Join(bad, "; ")))
		}
	}
	return errs
}

var (
	promqlStrings  = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	promqlMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promqlRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promqlGrouping = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	// Grafana's label_values(metric, label): the label is no metric.
	grafanaLabelValues = regexp.MustCompile(`label_values\(([^,()]*(?:\{[^}]*\})?)\s*,\s*[A-Za-z_][A-Za-z0-9_]*\s*\)`)
	promqlIdent        = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*(\s*\()?`)
	promqlKeywords     = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true, "inf": true, "nan": true}
	promqlFuncs        = map[string]bool{"label_values": true} // Grafana's, in variables
)

func init() {
	for _, f := range strings.Fields(`sum min max avg group stddev stdvar count count_values bottomk topk quantile limitk limit_ratio
		abs absent absent_over_time ceil changes clamp clamp_max clamp_min day_of_month day_of_week day_of_year days_in_month
		delta deriv exp floor histogram_avg histogram_count histogram_fraction histogram_quantile histogram_stddev histogram_stdvar
		histogram_sum holt_winters hour idelta increase irate label_join label_replace ln log2 log10 minute month predict_linear
		rate resets round scalar sgn sort sort_desc sort_by_label sort_by_label_desc sqrt time timestamp vector year
		avg_over_time min_over_time max_over_time sum_over_time count_over_time quantile_over_time stddev_over_time
		stdvar_over_time last_over_time present_over_time mad_over_time acos acosh asin asinh atan atanh cos cosh sin sinh tan tanh
		deg rad pi`) {
		promqlFuncs[f] = true
	}
}

// promqlNames returns the metric names and the functions a PromQL
// expression uses. It is no parser: it drops strings, label matchers,
// ranges and grouping clauses, then an identifier followed by "(" is a
// function and any other, keywords aside, a metric name.
func promqlNames(q string) (names, funcs []string) {
	q = promqlStrings.ReplaceAllString(q, `""`)
	q = grafanaLabelValues.ReplaceAllString(q, "label_values($1)")
	q = promqlMatchers.ReplaceAllString(q, " ")
	q = promqlRanges.ReplaceAllString(q, " ")
	q = promqlGrouping.ReplaceAllString(q, " ")
	for _, m := range promqlIdent.FindAllStringSubmatchIndex(q, -1) {
		id := strings.TrimRight(strings.TrimSuffix(q[m[0]:m[1]], "("), " \t\n")
		switch {
		case m[0] > 0 && (q[m[0]-1] == '$' || q[m[0]-1] >= '0' && q[m[0]-1] <= '9' || q[m[0]-1] == '.'):
			// a Grafana variable, or the tail of a number (1e3)
		case promqlKeywords[strings.ToLower(id)]:
		case m[2] >= 0:
			funcs = append(funcs, id)
		default:
			names = append(names, id)
		}
	}
	return names, funcs
}

// The extraction on its own: names, functions, and what is neither.
func TestPromqlNames(t *testing.T) {
	for _, tc := range []struct {
		q            string
		names, funcs []string
	}{
		{`sum by (type) (rate(superpeer_election_messages_sent_total{instance=~"$instance"}[$__rate_interval]))`,
			[]string{"superpeer_election_messages_sent_total"}, []string{"sum", "rate"}},
		{`superpeer_cluster_members{a="x"} and on (instance) (superpeer_role{role="superpeer"} == 1)`,
			[]string{"superpeer_cluster_members", "superpeer_role"}, nil},
		{`quantile(0.5, superpeer_network_size_estimate) / 2e3`, []string{"superpeer_network_size_estimate"}, []string{"quantile"}},
		{`label_values(superpeer_info{network=~"$network"}, instance)`, []string{"superpeer_info"}, []string{"label_values"}},
		{`go_goroutines offset 5m`, []string{"go_goroutines"}, nil},
	} {
		names, funcs := promqlNames(tc.q)
		if !slices.Equal(names, tc.names) || !slices.Equal(funcs, tc.funcs) {
			t.Errorf("promqlNames(%q) = %q, %q; want %q, %q", tc.q, names, funcs, tc.names, tc.funcs)
		}
	}
}
