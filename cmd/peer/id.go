package main

import (
	"fmt"

	"github.com/libp2p/go-libp2p/core/crypto"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/spf13/cobra"

	"github.com/superpeer/superpeer/overlay"
)

// defaultIdentity is the key file of `peer id init` and `peer id show`
// when none is named.
const defaultIdentity = "identity.key"

func newIDCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "id",
		Short: "Create or show a persistent peer identity (an Ed25519 key file)",
		Long: `A peer's ID is the hash of its public key. 'peer id init' writes a new
Ed25519 private key in libp2p's own key encoding to a file that only its
owner may read (mode 0600); 'peer run --identity FILE' then keeps the same
peer ID across restarts. 'peer id show' prints the ID a key file gives.`,
	}
	cmd.AddCommand(newIDInitCmd(), newIDShowCmd())
	return cmd
}

func newIDInitCmd() *cobra.Command {
	return newInitCmd("Write a new Ed25519 key to a file (mode 0600) and print its peer ID",
		"  peer id init --out node1.key\n  peer run --identity node1.key", defaultIdentity,
		func(cmd *cobra.Command, path string) error {
			k, _, err := crypto.GenerateEd25519Key(nil)
			if err != nil {
				return err
			}
			if err := overlay.SaveIdentity(path, k); err != nil {
				return err
			}
			id, err := peer.IDFromPrivateKey(k)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), id)
			return nil
		})
}

func newIDShowCmd() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:     "show",
		Short:   "Print the peer ID of a key file",
		Example: "  peer id show --identity node1.key",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, err := overlay.LoadIdentity(path)
			if err != nil {
				return fmt.Errorf("--identity: %w", err)
			}
			id, err := peer.IDFromPrivateKey(k)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), id)
			return nil
		},
	}
	cmd.Flags().StringVar(&path, "identity", defaultIdentity, "the key file (written by 'peer id init')")
	return cmd
}
