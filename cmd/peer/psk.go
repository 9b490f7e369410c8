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
	initCmd := newInitCmd("Write a new random pre-shared key to a file (mode 0600)",
		"  peer psk init --out swarm.key\n  peer run --psk swarm.key --listen /ip4/0.0.0.0/tcp/4001", "swarm.key",
		func(cmd *cobra.Command, path string) error {
			k, err := overlay.NewPSK()
			if err != nil {
				return err
			}
			if err := overlay.SavePSK(path, k); err != nil {
				return err
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote a pre-shared key to %s\n", path)
			return nil
		})
	cmd.AddCommand(initCmd)
	return cmd
}
