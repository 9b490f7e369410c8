package dhtselect

import (
	"bytes"
	"slices"
	"sort"

	"github.com/libp2p/go-libp2p/core/peer"
)

// Assignment is the brute-force answer for one peer: computed from the peer
// IDs of the whole network, it is what the overlay must converge to.
type Assignment struct {
	ID         peer.ID
	Key        Key
	ClusterKey Key
	Superpeer  peer.ID
}

// Closest returns the index in keys of the key closest to target, or -1 for
// no keys. Ties cannot happen between distinct keys under XOR.
func Closest(target Key, keys []Key) int {
	best := -1
	for i, k := range keys {
		if best < 0 || Closer(k, keys[best], target) {
			best = i
		}
	}
	return best
}

// Assign computes, by brute force over all peers, every peer's cluster key
// and superpeer for k reserved bits: the superpeer of p is the peer whose key
// is closest to p's cluster key. The result is in the order of ids.
func Assign(ids []peer.ID, k int) []Assignment {
	keys := make([]Key, len(ids))
	for i, id := range ids {
		keys[i] = KeyOf(id)
	}
	return assign(ids, keys, k)
}

// assign is Assign with the peers' keys given: keys[i] is ids[i]'s.
func assign(ids []peer.ID, keys []Key, k int) []Assignment {
	memo := make(map[Key]peer.ID)
	out := make([]Assignment, len(ids))
	for i, id := range ids {
		ck := keys[i].Cluster(k)
		sp, ok := memo[ck]
		if !ok {
			sp = ids[Closest(ck, keys)]
			memo[ck] = sp
		}
		out[i] = Assignment{ID: id, Key: keys[i], ClusterKey: ck, Superpeer: sp}
	}
	return out
}

// Cluster is one cluster of the brute-force answer.
type Cluster struct {
	Key       Key
	Prefix    string
	Superpeer peer.ID
	Members   []peer.ID // sorted by key, superpeer first
}

// Clusters groups an assignment into clusters, sorted by cluster key.
func Clusters(as []Assignment, k int) []Cluster {
	byKey := make(map[Key]*Cluster)
	for _, a := range as {
		c := byKey[a.ClusterKey]
		if c == nil {
			c = &Cluster{Key: a.ClusterKey, Prefix: a.ClusterKey.Prefix(k), Superpeer: a.Superpeer}
			byKey[a.ClusterKey] = c
		}
		c.Members = append(c.Members, a.ID)
	}
	out := make([]Cluster, 0, len(byKey))
	for _, c := range byKey {
		SortByKey(c.Members)
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Cluster) int { return slices.Compare(a.Key[:], b.Key[:]) })
	return out
}

// SortByKey sorts peer IDs by their keys, smallest first.
func SortByKey(ids []peer.ID) {
	keys := make([]Key, len(ids))
	for i, p := range ids {
		keys[i] = KeyOf(p) // once per peer, not per comparison
	}
	SortByKeys(ids, keys)
}

// SortByKeys sorts ids by keys, keys[i] being ids[i]'s key (KeyOf), and
// keys with them.
func SortByKeys(ids []peer.ID, keys []Key) {
	sort.Sort(byKeys{ids, keys})
}

type byKeys struct {
	ids  []peer.ID
	keys []Key
}

func (b byKeys) Len() int           { return len(b.ids) }
func (b byKeys) Less(i, j int) bool { return bytes.Compare(b.keys[i][:], b.keys[j][:]) < 0 }
func (b byKeys) Swap(i, j int) {
	b.ids[i], b.ids[j] = b.ids[j], b.ids[i]
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
}
