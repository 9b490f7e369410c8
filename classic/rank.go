package classic

import (
	"bytes"
	"cmp"
	"crypto/sha256"
)

// The ranks besides HighestID. Every process of a cluster must use the same
// Rank with the same parameters (target, key function, quality table), or
// processes disagree on who should win and elections do not settle.

// XORCloseness ranks a process higher the closer its key is to Target in XOR
// distance, the Kademlia metric. With Target set to a cluster key, the winner
// of an election is the member a DHT lookup of that key would end at, so the
// classic election and the ID-space reservation of dhtselect agree.
//
// Distances are compared as big-endian unsigned numbers. A key shorter than
// Target (or a Target shorter than the key) is padded on the right with zero
// bytes, so keys are bit strings read from the most significant bit. Ties
// (equal keys) are broken by the ID as bytes, larger ID higher, so the order
// is total.
type XORCloseness struct {
	// Target is the key the winner should be closest to, e.g. a cluster's
	// masked prefix key.
	Target []byte
	// Key maps a process to its key. Nil means SHA-256 of the ID's bytes, the
	// way kad-dht derives a peer's key from its peer ID.
	Key func(ID) []byte
}

// Compare implements Rank: positive when a is closer to Target than b.
func (x XORCloseness) Compare(a, b ID) int {
	if a == b {
		return 0
	}
	da := xorDistance(x.key(a), x.Target)
	db := xorDistance(x.key(b), x.Target)
	if c := bytes.Compare(db, da); c != 0 { // smaller distance ranks higher
		return c
	}
	return HighestID{}.Compare(a, b)
}

func (x XORCloseness) key(id ID) []byte {
	if x.Key != nil {
		return x.Key(id)
	}
	h := sha256.Sum256([]byte(id))
	return h[:]
}

// xorDistance returns k XOR t over the longer of the two lengths, the shorter
// one padded on the right with zeros.
func xorDistance(k, t []byte) []byte {
	n := max(len(k), len(t))
	d := make([]byte, n)
	for i := range d {
		var kb, tb byte
		if i < len(k) {
			kb = k[i]
		}
		if i < len(t) {
			tb = t[i]
		}
		d[i] = kb ^ tb
	}
	return d
}

// Quality describes how well a host can serve as a superpeer.
type Quality struct {
	// Capacity is what the host can serve (bandwidth, slots, any unit the
	// cluster agrees on); more ranks higher.
	Capacity uint64
	// UptimeTicks is how long the host has been up without interruption, in
	// ticks; more ranks higher.
	UptimeTicks uint64
	// Flaps counts how often the host went down and came back recently;
	// fewer ranks higher.
	Flaps uint32
}

// HostQuality ranks processes by a table of host qualities: higher Capacity
// first, then fewer Flaps, then longer UptimeTicks, and finally the larger ID
// (as HighestID) so the order is total. A process missing from the table has
// the zero Quality and so ranks below every listed host with any capacity.
//
// The table is read on every comparison. Do not change it while an election
// is running, and give every process the same table (for example the one the
// membership gossip agreed on), or the processes disagree on the winner.
type HostQuality map[ID]Quality

// Compare implements Rank.
func (h HostQuality) Compare(a, b ID) int {
	if a == b {
		return 0
	}
	qa, qb := h[a], h[b]
	if c := cmp.Compare(qa.Capacity, qb.Capacity); c != 0 {
		return c
	}
	if c := cmp.Compare(qb.Flaps, qa.Flaps); c != 0 { // fewer flaps ranks higher
		return c
	}
	if c := cmp.Compare(qa.UptimeTicks, qb.UptimeTicks); c != 0 {
		return c
	}
	return HighestID{}.Compare(a, b)
}

// Compile-time checks that the ranks implement Rank.
var (
	_ Rank = HighestID{}
	_ Rank = XORCloseness{}
	_ Rank = HostQuality(nil)
)
