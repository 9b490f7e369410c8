// Command index is a small application on the overlay's events: every
// superpeer keeps an index of what its members share, and every member
// registers its items with its superpeer whenever its superpeer changes
// or its cluster elects one.
//
// It starts an in-process testnet (real libp2p hosts, kad-dht and
// GossipSub) with bully elections, waits for the clusters, stops the
// superpeer of one cluster, and shows the new superpeer rebuild its index
// from the members' registrations:
//
//	go run ./examples/index
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/network"
	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay"
	"github.com/superpeer/superpeer/testnet"
)

// proto carries one registration: a line of the member's items.
const proto = "/example/index/1.0.0"

// indexer is one node of the application.
type indexer struct {
	node  *overlay.Node
	out   io.Writer
	items []string

	mu    sync.Mutex
	index map[peer.ID][]string // as a superpeer: member -> items
}

func (x *indexer) handle(s network.Stream) {
	defer s.Close()
	_ = s.SetDeadline(time.Now().Add(5 * time.Second))
	line, err := bufio.NewReader(s).ReadString('\n')
	if err != nil || x.node.State().Role != overlay.RoleSuperpeer {
		_ = s.Reset()
		return
	}
	x.mu.Lock()
	x.index[s.Conn().RemotePeer()] = strings.Fields(line)
	x.mu.Unlock()
	_, _ = s.Write([]byte("ok\n"))
}

// register sends the items to sp, three times at most: a member may learn
// of its new superpeer before the superpeer does, and then it refuses.
func (x *indexer) register(ctx context.Context, sp peer.ID) error {
	var err error
	for range 3 {
		if err = x.send(ctx, sp); err == nil || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Second)
	}
	return err
}

func (x *indexer) send(ctx context.Context, sp peer.ID) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := x.node.Host().NewStream(ctx, sp, proto)
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := fmt.Fprintln(s, strings.Join(x.items, " ")); err != nil {
		return err
	}
	ack := make([]byte, 3)
	if _, err := io.ReadFull(s, ack); err != nil {
		return fmt.Errorf("refused: %w", err)
	}
	return nil
}

// run reacts to the node's events until ctx ends.
func (x *indexer) run(ctx context.Context) {
	sub, err := x.node.Subscribe()
	if err != nil {
		log.Fatal(err)
	}
	defer sub.Close()
	for {
		select {
		case <-ctx.Done():
			return
		case evt, ok := <-sub.Out():
			if !ok {
				return // the node closed
			}
			switch e := evt.(type) {
			case overlay.EvtRoleChanged:
				if e.New != overlay.RoleSuperpeer {
					x.mu.Lock()
					clear(x.index) // no longer ours to serve
					x.mu.Unlock()
				}
			case overlay.EvtSuperpeerChanged:
				if e.New.ID != "" && e.New.ID != x.node.ID() {
					if err := x.register(ctx, e.New.ID); err != nil && ctx.Err() == nil {
						log.Printf("%s: register with %s: %v", x.node.ID().ShortString(), e.New.ID.ShortString(), err)
					}
				}
			case overlay.EvtSuperpeerElected:
				fmt.Fprintf(x.out, "%s: cluster elected %s (term %d)\n", x.node.ID().ShortString(), e.Superpeer.ShortString(), e.Term)
				// An election names the superpeer again: it may be the
				// one this member had, back after losing the role for a
				// moment (and its index with it). Registering again is
				// harmless: the index keeps the member's last items.
				if e.Superpeer != "" && e.Superpeer != x.node.ID() {
					if err := x.register(ctx, e.Superpeer); err != nil && ctx.Err() == nil {
						log.Printf("%s: register with %s: %v", x.node.ID().ShortString(), e.Superpeer.ShortString(), err)
					}
				}
			}
		}
	}
}

func (x *indexer) show() {
	x.mu.Lock()
	defer x.mu.Unlock()
	members := slices.Sorted(maps.Keys(x.index))
	fmt.Fprintf(x.out, "superpeer %s indexes %d members:\n", x.node.ID().ShortString(), len(members))
	for _, p := range members {
		fmt.Fprintf(x.out, "  %s: %s\n", p.ShortString(), strings.Join(x.index[p], ", "))
	}
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := run(ctx, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// run starts the testnet and the application, shows the indexes, stops a
// superpeer, shows them again, and returns the live nodes' applications.
func run(ctx context.Context, out io.Writer) (map[peer.ID]*indexer, error) {
	tn, err := testnet.Start(ctx, testnet.Config{N: 12, Target: dhtselect.Target{Superpeers: 2}, Seed: 7,
		AnnounceInterval: time.Second, Election: "bully"})
	if err != nil {
		return nil, err
	}
	defer tn.Close()
	apps := map[peer.ID]*indexer{}
	for i, n := range tn.Nodes() {
		x := &indexer{node: n, out: out, items: []string{fmt.Sprintf("song-%d.ogg", i), fmt.Sprintf("photo-%d.png", i)},
			index: map[peer.ID][]string{}}
		n.Host().SetStreamHandler(proto, x.handle)
		apps[n.ID()] = x
		go x.run(ctx)
	}
	if _, err := tn.WaitConverged(ctx, tn.Started()); err != nil {
		return nil, err
	}
	time.Sleep(2 * time.Second) // registrations in flight
	var victim peer.ID
	for _, n := range tn.Nodes() {
		if n.State().Role == overlay.RoleSuperpeer {
			apps[n.ID()].show()
			victim = n.ID()
		}
	}
	fmt.Fprintf(out, "\nstopping superpeer %s\n\n", victim.ShortString())
	if err := tn.Stop(victim); err != nil {
		return nil, err
	}
	delete(apps, victim)
	if _, err := tn.WaitConverged(ctx, time.Now()); err != nil {
		return nil, err
	}
	// Registrations in flight: a member whose event loop is still retrying
	// one to a superpeer it named for a moment registers with the elected
	// one after that (up to three tries of a second or more each), so wait
	// until every member is indexed, for 20 s at most, rather than a fixed
	// 2 s (TestIndexSurvivesFailover failed once so in a full make test).
	for end := time.Now().Add(20 * time.Second); time.Now().Before(end) && len(unindexed(apps)) > 0; {
		time.Sleep(100 * time.Millisecond)
	}
	for _, n := range tn.Nodes() {
		if n.State().Role == overlay.RoleSuperpeer {
			apps[n.ID()].show()
		}
	}
	return apps, nil
}

// unindexed lists the live ordinary nodes that are not in the index of
// the superpeer they name with their items, and why.
func unindexed(apps map[peer.ID]*indexer) []string {
	var out []string
	for id, x := range apps {
		st := x.node.State()
		if st.Role == overlay.RoleSuperpeer {
			continue
		}
		sp, ok := apps[st.Superpeer.ID]
		if !ok {
			out = append(out, fmt.Sprintf("%s names superpeer %s, not a live node", id.ShortString(), st.Superpeer.ID.ShortString()))
			continue
		}
		sp.mu.Lock()
		items := sp.index[id]
		sp.mu.Unlock()
		if !slices.Equal(items, x.items) {
			out = append(out, fmt.Sprintf("superpeer %s indexes %v for %s, want %v", st.Superpeer.ID.ShortString(), items, id.ShortString(), x.items))
		}
	}
	return out
}
