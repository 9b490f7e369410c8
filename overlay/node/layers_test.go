package node

import (
	"os/exec"
	"strings"
	"testing"
)

// TestPureLayers: nothing below the overlay's shell imports libp2p's host,
// network or transports, directly or through another package; the node
// machine and the algorithms it runs are pure (DESIGN.md: imports point
// down). gossip is the exception by design: it is GossipSub's topics.
func TestPureLayers(t *testing.T) {
	pure := []string{
		"github.com/superpeer/superpeer/overlay/node",
		"github.com/superpeer/superpeer/classic/...",
		"github.com/superpeer/superpeer/dhtselect",
		"github.com/superpeer/superpeer/geometric",
		"github.com/superpeer/superpeer/testnet/nodesim",
		"github.com/superpeer/superpeer/testnet/sim",
	}
	out, err := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, pure...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 10 {
		t.Fatalf("go list listed %d packages: %v", len(deps), deps)
	}
	for _, d := range deps {
		for _, banned := range []string{
			"github.com/libp2p/go-libp2p/core/host", "github.com/libp2p/go-libp2p/core/network",
			"github.com/libp2p/go-libp2p/p2p", "github.com/libp2p/go-libp2p-pubsub", "github.com/libp2p/go-libp2p-kad-dht",
			"github.com/superpeer/superpeer/gossip",
		} {
			if d == banned || strings.HasPrefix(d, banned+"/") {
				t.Errorf("a pure package depends on %s", d)
			}
		}
		if d == "github.com/superpeer/superpeer/overlay" {
			t.Errorf("a pure package depends on the shell, %s", d)
		}
	}
}
