package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/superpeer/superpeer/classic"
	"github.com/superpeer/superpeer/dhtselect"
)

// errNotConverged makes `peer testnet` exit with status 2 when the overlay
// did not converge in time (status 1 is for bad input and failures).
var errNotConverged = errors.New("overlay did not converge before the timeout")

func exitCode(err error) int {
	if errors.Is(err, errNotConverged) {
		return 2
	}
	return 1
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "peer",
		Short:         "A libp2p node that organises a swarm into clusters served by superpeers",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())
	})
	root.AddCommand(newRunCmd(), newTestnetCmd(), newBenchCmd(), newIDCmd(), newPSKCmd(), newConfigCmd(), newStatusCmd())
	return root
}

// targetFlags are --superpeers and --fraction, shared by run and testnet.
// electionFlags are --election, --quorum and --ignore-flaps, shared by run
// and testnet.
type electionFlags struct {
	name        string
	quorum      bool
	ignoreFlaps bool
}

func (e *electionFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&e.name, "election", "", "election algorithm each cluster runs: "+strings.Join(classic.Algorithms(), ", ")+" (default none: the selector alone names the superpeer)")
	fs.BoolVar(&e.quorum, "quorum", false, "wrap the election with terms and majority, against split brain (needs --election)")
	fs.BoolVar(&e.ignoreFlaps, "ignore-flaps", false, "turn host quality off: a node that keeps losing all its connections does not rank itself last")
}

type targetFlags struct {
	superpeers int
	fraction   float64
}

func (t *targetFlags) register(fs *pflag.FlagSet, defFraction float64) {
	fs.IntVar(&t.superpeers, "superpeers", 0, "target number of superpeers S (k = ceil(log2 S) reserved bits)")
	fs.Float64Var(&t.fraction, "fraction", defFraction, "target superpeers as a fraction F of the estimated network size, in (0, 1]")
}

// target returns the validated target; --superpeers, when given, replaces
// the default fraction.
func (t *targetFlags) target(fs *pflag.FlagSet) (dhtselect.Target, error) {
	var tg dhtselect.Target
	switch {
	case fs.Changed("superpeers") && fs.Changed("fraction"):
		return tg, fmt.Errorf("give --superpeers or --fraction, not both")
	case fs.Changed("superpeers"):
		if t.superpeers < 1 {
			return tg, fmt.Errorf("--superpeers %d: want at least 1", t.superpeers)
		}
		tg.Superpeers = t.superpeers
	default:
		tg.Fraction = t.fraction
	}
	if err := tg.Validate(); err != nil {
		return tg, errors.New(strings.TrimPrefix(err.Error(), dhtselect.ErrBadTarget.Error()+": "))
	}
	return tg, nil
}

// logFlags configure the structured logger.
type logFlags struct {
	level  string
	format string
}

func (l *logFlags) register(fs *pflag.FlagSet, defLevel string) {
	fs.StringVar(&l.level, "log-level", defLevel, "log level: debug, info, warn or error")
	fs.StringVar(&l.format, "log-format", "text", "log format: text or json")
}

func (l *logFlags) logger() (*slog.Logger, error) { return l.loggerTo(os.Stderr) }

// loggerTo is logger writing to w.
func (l *logFlags) loggerTo(w io.Writer) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(l.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", l.level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch l.format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", l.format)
}

// newInitCmd is the `init` subcommand of id, psk and config: it creates
// the file --out (default def; an empty name, or an existing file, is an
// error, and no file is ever overwritten) with create, whose errors are
// reported as --out's.
func newInitCmd(short, example, def string, create func(cmd *cobra.Command, path string) error) *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use: "init", Short: short, Example: example, Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out: empty file name")
			}
			if err := create(cmd, out); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", def, "the file to create; an existing file is never overwritten")
	return cmd
}
