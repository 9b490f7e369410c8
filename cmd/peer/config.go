package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// The config file of peer run is TOML. Its keys are the names of peer
// run's flags and its values theirs (durations as strings, "5s"; lists as
// arrays), so every option has one name, one meaning and one check; a flag
// given on the command line overrides the file. 'peer config init' writes
// every option with its default and its help, commented out.

// configFlag is the flag that names the config file; it cannot be set in
// the file itself.
const configFlag = "config"

// configSkip are the flags a config file cannot set: itself, --help, and
// the hidden ones (a testnet's control channel).
func configSkip(f *pflag.Flag) bool { return f.Name == configFlag || f.Name == "help" || f.Hidden }

// applyConfig reads the TOML file at path and sets the flags of fs that it
// names and that the command line did not set. An unknown key, a value of
// the wrong type or out of range is an error that names the key.
func applyConfig(fs *pflag.FlagSet, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--config: %w", err)
	}
	var doc map[string]any
	if err := toml.Unmarshal(b, &doc); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return fmt.Errorf("--config %s: line %d, column %d: %s", path, row, col, de.Error())
		}
		return fmt.Errorf("--config %s: %w", path, err)
	}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		f := fs.Lookup(k)
		if f == nil || configSkip(f) {
			return fmt.Errorf("--config %s: unknown option %q (see 'peer config init' for every option)", path, k)
		}
		if f.Changed || overriddenTarget(fs, k) {
			continue // the command line wins
		}
		v, err := flagValue(f, doc[k])
		if err != nil {
			return fmt.Errorf("--config %s: option %q: %w", path, k, err)
		}
		if err := fs.Set(k, v); err != nil {
			return fmt.Errorf("--config %s: option %q: %w", path, k, err)
		}
	}
	return nil
}

// overriddenTarget reports that key is one of the two ways to set the
// target (superpeers, fraction) and the command line set the other: the
// command line wins over the file there too.
func overriddenTarget(fs *pflag.FlagSet, key string) bool {
	other := map[string]string{"superpeers": "fraction", "fraction": "superpeers"}[key]
	return other != "" && fs.Changed(other)
}

// flagValue turns a TOML value into the text f's Set takes.
func flagValue(f *pflag.Flag, v any) (string, error) {
	list := strings.HasSuffix(f.Value.Type(), "Slice")
	switch v := v.(type) {
	case []any:
		if !list {
			return "", fmt.Errorf("a list, want a %s", typeName(f))
		}
		parts := make([]string, len(v))
		for i, x := range v {
			s, ok := x.(string)
			if !ok {
				return "", fmt.Errorf("item %d is %v, want a string", i+1, x)
			}
			parts[i] = s
		}
		return strings.Join(parts, ","), nil
	case string:
		if list {
			return "", fmt.Errorf("%q, want a list of strings", v)
		}
		if f.Value.Type() != "string" && f.Value.Type() != "duration" {
			return "", fmt.Errorf("%q, want a %s", v, typeName(f))
		}
		return v, nil
	case int64:
		if f.Value.Type() != "int" && f.Value.Type() != "uint" && f.Value.Type() != "float64" {
			return "", fmt.Errorf("%d, want a %s", v, typeName(f))
		}
		return strconv.FormatInt(v, 10), nil
	case float64:
		if f.Value.Type() != "float64" {
			return "", fmt.Errorf("%v, want a %s", v, typeName(f))
		}
		return strconv.FormatFloat(v, 'g', -1, 64), nil
	case bool:
		if f.Value.Type() != "bool" {
			return "", fmt.Errorf("%v, want a %s", v, typeName(f))
		}
		return strconv.FormatBool(v), nil
	}
	return "", fmt.Errorf("%v (%T), want a %s", v, v, typeName(f))
}

func typeName(f *pflag.Flag) string {
	switch t := f.Value.Type(); t {
	case "stringSlice":
		return "list of strings"
	case "duration":
		return `duration such as "5s"`
	case "float64":
		return "number"
	case "int", "uint":
		return "whole number"
	default:
		return t
	}
}

// writeConfigTemplate writes every option of fs that a config file may set,
// each with its help and its default, commented out.
func writeConfigTemplate(fs *pflag.FlagSet) []byte {
	var b bytes.Buffer
	b.WriteString("# Configuration of 'peer run' (TOML). Every option is a flag of 'peer run'\n" +
		"# of the same name; a flag given on the command line overrides this file.\n" +
		"# Lists are arrays of strings, durations strings such as \"5s\".\n" +
		"# Uncomment a line to change its default. Use it with: peer run --config FILE\n")
	fs.VisitAll(func(f *pflag.Flag) {
		if configSkip(f) {
			return
		}
		fmt.Fprintf(&b, "\n# %s\n# %s = %s\n", f.Usage, f.Name, tomlDefault(f))
	})
	return b.Bytes()
}

// tomlDefault is f's default as a TOML value.
func tomlDefault(f *pflag.Flag) string {
	switch f.Value.Type() {
	case "stringSlice":
		def := strings.Trim(f.DefValue, "[]")
		if def == "" {
			return "[]"
		}
		var q []string
		for _, s := range strings.Split(def, ",") {
			q = append(q, strconv.Quote(s))
		}
		return "[" + strings.Join(q, ", ") + "]"
	case "string", "duration":
		return strconv.Quote(f.DefValue)
	}
	return f.DefValue
}

func newConfigCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Write a config file for 'peer run' with every option and its default",
	}
	initCmd := newInitCmd("Write every option of 'peer run', with its help and default, commented out, to a new file",
		"  peer config init --out peer.toml\n  peer run --config peer.toml", "peer.toml",
		func(cmd *cobra.Command, path string) error {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return err
			}
			if _, err := f.Write(writeConfigTemplate(newRunCmd().Flags())); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote the options of 'peer run' to %s\n", path)
			return nil
		})
	cmd.AddCommand(initCmd)
	return cmd
}
