package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/superpeer/superpeer/overlay"
)

func newPSKCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "psk",
		Short: "Create a pre-shared key for a private swarm",
		Long: `A private swarm (libp2p's private networks) admits only peers that hold its
pre-shared key: 'peer psk init' writes a new random 32-byte key in the
swarm.key format that IPFS and other libp2p implementations read, to a file
that only its owner may read (mode 0600). Give every peer of the swarm a copy
and run it with 'peer run --psk FILE'.`,
	}
	var out string
	initCmd := &cobra.Command{
		Use:     "init",
		Short:   "Write a new random pre-shared key to a file (mode 0600)",
		Example: "  peer psk init --out swarm.key\n  peer run --psk swarm.key --listen /ip4/0.0.0.0/tcp/4001",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return fmt.Errorf("--out: empty file name")
			}
			k, err := overlay.NewPSK()
			if err != nil {
				return err
			}
			if err := overlay.SavePSK(out, k); err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote a pre-shared key to %s\n", out)
			return nil
		},
	}
	initCmd.Flags().StringVar(&out, "out", "swarm.key", "the key file to create; an existing file is never overwritten")
	cmd.AddCommand(initCmd)
	return cmd
}
