package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// runFlags returns peer run's flag set after parsing args.
func runFlags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := newRunCmd().Flags()
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return fs
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "peer.toml")
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A config file sets the flags it names, and the command line wins.
func TestApplyConfig(t *testing.T) {
	path := writeFile(t, `
network = "lab"
announce = "2s"
listen = ["/ip4/127.0.0.1/tcp/4001", "/ip4/127.0.0.1/udp/4001/quic-v1"]
superpeers = 4
quorum = true
election = "bully"
capacity = 32
data-dir = "/var/lib/peer"
memory-budget = 512
`)
	fs := runFlags(t, "--network", "cli", "--fraction", "0.2")
	if err := applyConfig(fs, path); err != nil {
		t.Fatal(err)
	}
	get := func(name string) string { return fs.Lookup(name).Value.String() }
	want := map[string]string{
		"network":       "cli", // the command line wins
		"announce":      (2 * time.Second).String(),
		"listen":        "[/ip4/127.0.0.1/tcp/4001,/ip4/127.0.0.1/udp/4001/quic-v1]",
		"superpeers":    "0", // the command line set the target with --fraction
		"fraction":      "0.2",
		"quorum":        "true",
		"election":      "bully",
		"capacity":      "32",
		"data-dir":      "/var/lib/peer",
		"memory-budget": "512",
		"reevaluate":    "5s", // not in the file: the default
	}
	for name, w := range want {
		if got := get(name); got != w {
			t.Errorf("%s = %s, want %s", name, got, w)
		}
	}
}

// Bad files get an error that names the option (or the line) and the
// problem.
func TestApplyConfigErrors(t *testing.T) {
	for _, tc := range []struct{ content, want string }{
		{`nope = 1`, `unknown option "nope"`},
		{`control = true`, `unknown option "control"`},
		{`config = "other.toml"`, `unknown option "config"`},
		{`help = true`, `unknown option "help"`},
		{`announce = 5`, `option "announce": 5, want a duration`},
		{`announce = "five"`, `option "announce": invalid argument "five"`},
		{`listen = "/ip4/127.0.0.1/tcp/1"`, `option "listen": "/ip4/127.0.0.1/tcp/1", want a list of strings`},
		{`listen = [1, 2]`, `option "listen": item 1 is 1, want a string`},
		{`capacity = "64"`, `option "capacity": "64", want a whole number`},
		{`capacity = 1.5`, `option "capacity": 1.5, want a whole number`},
		{`memory-budget = "256MB"`, `option "memory-budget": "256MB", want a whole number`},
		{`quorum = "yes"`, `option "quorum": "yes", want a bool`},
		{`data-dir = ["a"]`, `option "data-dir": a list, want a string`},
		{`data-dir = 1`, `option "data-dir": 1, want a string`},
		{`network = ["a"]`, `option "network": a list, want a string`},
		{"network = \"a\"\nannounce = ", "line 2"},
		{`[section]`, `unknown option "section"`},
	} {
		err := applyConfig(runFlags(t), writeFile(t, tc.content))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "--config ") {
			t.Errorf("%q: error %v, want one saying %q", tc.content, err, tc.want)
		}
	}
	if err := applyConfig(runFlags(t), filepath.Join(t.TempDir(), "missing.toml")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("missing file: %v", err)
	}
}

// The template names every option a file may set, with its default: with
// every line uncommented (but the target's two ways, which exclude each
// other, and superpeers' 0, which means unset), it applies cleanly and
// changes nothing.
func TestConfigTemplate(t *testing.T) {
	fs := newRunCmd().Flags()
	tmpl := string(writeConfigTemplate(fs))
	var lines []string
	fs.VisitAll(func(f *pflag.Flag) {
		if configSkip(f) {
			if strings.Contains(tmpl, "# "+f.Name+" = ") {
				t.Errorf("the template offers %q", f.Name)
			}
			return
		}
		if !strings.Contains(tmpl, "\n# "+f.Usage+"\n# "+f.Name+" = ") {
			t.Errorf("the template lacks %q with its help", f.Name)
		}
	})
	for _, l := range strings.Split(tmpl, "\n") {
		name, _, ok := strings.Cut(strings.TrimPrefix(l, "# "), " = ")
		if f := fs.Lookup(name); ok && f != nil && name != "superpeers" {
			lines = append(lines, strings.TrimPrefix(l, "# "))
		}
	}
	if len(lines) < 15 {
		t.Fatalf("%d option lines in the template", len(lines))
	}
	fs2 := runFlags(t)
	if err := applyConfig(fs2, writeFile(t, strings.Join(lines, "\n"))); err != nil {
		t.Fatalf("the uncommented template: %v", err)
	}
	fs2.VisitAll(func(f *pflag.Flag) {
		if d := fs.Lookup(f.Name); d.Value.String() != f.Value.String() {
			t.Errorf("%s = %s after the template, default %s", f.Name, f.Value, d.Value)
		}
	})
}

// A memory budget out of range is refused before the node starts.
func TestMemoryBudgetFlag(t *testing.T) {
	for _, mib := range []string{"0", "-1", "100", "2000000"} {
		cmd := newRunCmd()
		cmd.SetArgs([]string{"--memory-budget", mib})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--memory-budget "+mib+": want 128 to") {
			t.Errorf("--memory-budget %s: %v", mib, err)
		}
	}
}
