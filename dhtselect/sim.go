package dhtselect

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"slices"

	"github.com/libp2p/go-libp2p/core/peer"

	"github.com/superpeer/superpeer/stats"
)

// ErrSimConfig reports a SimConfig that Simulate cannot run.
var ErrSimConfig = errors.New("dhtselect: bad simulation config")

// SimAlpha is the lookup concurrency the live node uses (overlay's
// lookupAlpha: three queries in flight, as in Kademlia).
const SimAlpha = 3

// MaxSimPeers is the largest network Simulate accepts. Peers are indexed
// with int32 and the sorted keys alone take 32 bytes a peer, so 2^24 peers
// need about a gigabyte before the first lookup.
const MaxSimPeers = 1 << 24

// SimConfig configures Simulate.
type SimConfig struct {
	// N is the number of peers, at least 1.
	N int
	// Target is how many superpeers are wanted, as the node's --superpeers
	// or --fraction flag gives it; k = Target.K(N).
	Target Target
	// Seed is the only source of randomness: it draws the peer IDs (hence
	// the keys) and the peers each routing-table bucket holds.
	Seed uint64
	// BucketSize is the k-bucket size of the routing tables, and the
	// number of peers an answer and the seeds of a lookup carry (in
	// kad-dht both are K). Zero means BucketSize (20, kad-dht's default).
	BucketSize int
	// Alpha is the number of queries a lookup keeps in flight. Zero means
	// SimAlpha, what the live node uses.
	Alpha int
}

func (c SimConfig) validate() error {
	switch {
	case c.N < 1:
		return fmt.Errorf("%w: SimConfig.N = %d, want at least 1 peer", ErrSimConfig, c.N)
	case c.N > MaxSimPeers:
		return fmt.Errorf("%w: SimConfig.N = %d, more than MaxSimPeers (%d)", ErrSimConfig, c.N, MaxSimPeers)
	case c.BucketSize < 0:
		return fmt.Errorf("%w: SimConfig.BucketSize = %d, want 0 (for %d) or more", ErrSimConfig, c.BucketSize, BucketSize)
	case c.Alpha < 0:
		return fmt.Errorf("%w: SimConfig.Alpha = %d, want 0 (for %d) or more", ErrSimConfig, c.Alpha, SimAlpha)
	}
	if err := c.Target.Validate(); err != nil {
		return fmt.Errorf("%w: SimConfig.Target: %w", ErrSimConfig, err)
	}
	return nil
}

// SimStat summarises one integer per lookup or per peer.
type SimStat struct {
	Mean     float64
	P50, P99 int // nearest-rank percentiles (package stats)
	Max      int
	Total    int64
}

func (s SimStat) String() string {
	return fmt.Sprintf("mean %.2f p50 %d p99 %d max %d", s.Mean, s.P50, s.P99, s.Max)
}

func simStat(v []int32) SimStat {
	s := stats.Sort(v)
	var total int64
	for _, x := range s {
		total += int64(x)
	}
	return SimStat{
		Mean:  stats.Mean(v),
		P50:   int(s.Percentile(50)),
		P99:   int(s.Percentile(99)),
		Max:   int(s.Max()),
		Total: total,
	}
}

// SimResult is what Simulate measured. Peers are numbered 0..N-1 in the
// order their IDs were drawn; IDs[i] is peer i.
type SimResult struct {
	N int // peers
	S int // superpeers wanted, Target.S(N)
	K int // reserved bits, Target.K(N)

	// IDs holds the peer IDs, peer i's at index i.
	IDs []peer.ID
	// Attach[i] is the peer at which peer i's lookup of its cluster key
	// ended: its superpeer (i itself if it is one).
	Attach []int
	// Superpeers lists, in increasing order, the peers that are some
	// peer's superpeer by lookup.
	Superpeers []int
	// Correct counts the lookups that ended at the brute-force answer, the
	// peer whose key is closest to the cluster key (all of them, unless
	// the lookup is wrong).
	Correct int

	// Rounds is per lookup: the number of unit-latency waves, that is the
	// longest chain of queries each sent in answer to the previous one.
	Rounds SimStat
	// Messages is per lookup (so per peer): the queries it sent. Each
	// query has one reply, not counted; double the figures for both.
	Messages SimStat
	// Load is per peer: the queries it answered, for all lookups together.
	// Its mean equals Messages.Mean; its maximum shows the hot spots (the
	// peers closest to a cluster key are asked by the whole cluster).
	Load SimStat

	// Clusters is 2^K, the number of cluster keys.
	Clusters int
	// Occupied counts the cluster keys at least one peer has; it is the
	// number of distinct superpeers a correct run finds.
	Occupied int
	// ClusterSize is per superpeer (by lookup): the peers attached to it,
	// itself included.
	ClusterSize SimStat
}

// Simulate runs DHT-mode superpeer selection over N peers, deterministically
// from cfg.Seed: every peer looks up its cluster key with Lookup, driven as
// the live node drives it, over ideal Kademlia routing tables, and the
// result is checked against the brute-force answer.
//
// The model:
//
//   - Peer IDs are Ed25519-style identity multihashes of seeded random
//     bytes (no key pairs); keys are KeyOf(ID), as in kad-dht.
//   - Routing tables are those of a fully refreshed kad-dht: for each
//     common-prefix length b with the owner, the bucket holds every peer
//     sharing exactly b leading bits with it if there are at most
//     BucketSize, else BucketSize of them chosen uniformly by a generator
//     seeded from (Seed, owner, b). Those peers form a contiguous range
//     of the sorted keys, so the tables are never materialised: a bucket
//     is located by binary search and sampled on demand, the same way
//     each time.
//   - A query asks a peer for the BucketSize peers of its table closest to
//     the cluster key, with the rule of kbucket's NearestPeers (the target's
//     bucket, then deeper buckets, then shallower ones); the asker drops
//     itself from the answer, as overlay does. No peer fails.
//   - A lookup starts from the BucketSize peers of the peer's own table
//     closest to its cluster key and runs NewLookup(clusterKey, self,
//     seeds, Resiliency, Alpha) to Done, driven like overlay's lookup: ask
//     what Next returns, take one answer, feed it, ask Next again. Every
//     query takes one time unit and answers arrive in the order sent, so a
//     query sent on an answer at time t is answered at t+1; Rounds is the
//     time of the last answer, the length of the longest chain of
//     dependent queries. The first of Result is the superpeer.
//
// Lookups run one after another (the package has no goroutines). Nearly all the time goes into Lookup itself (hashing the IDs it
// hears, its map and its sorted insertions): 100,000 peers with S = 1,000
// take about 4 CPU-seconds and under 40 MB of heap.
func Simulate(cfg SimConfig) (*SimResult, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.BucketSize == 0 {
		cfg.BucketSize = BucketSize
	}
	if cfg.Alpha == 0 {
		cfg.Alpha = SimAlpha
	}
	n := cfg.N
	net := newSimNet(n, cfg.Seed, cfg.BucketSize)
	res := &SimResult{
		N:        n,
		S:        cfg.Target.S(n),
		K:        cfg.Target.K(n),
		Clusters: 1 << cfg.Target.K(n),
		IDs:      make([]peer.ID, n),
	}
	for i := range n {
		res.IDs[i] = net.ids[net.pos[i]]
	}

	// Lookups, by sorted position; each is independent of the others.
	attach := make([]int32, n)
	queries := make([]int32, n)
	rounds := make([]int32, n)
	load := make([]int32, n)
	d := net.newDriver(res.K, cfg.Alpha, load)
	for x := range n {
		attach[x], queries[x], rounds[x] = d.run(int32(x))
	}

	// The brute-force answer: the peers of a cluster are contiguous in key
	// order, so each cluster key's closest peer is found once.
	want := int32(-1)
	for x := range n {
		if x == 0 || simCPL(&net.keys[x], &net.keys[x-1]) < res.K {
			res.Occupied++
			ck := net.keys[x].Cluster(res.K)
			want = net.closest(&ck)
		}
		if attach[x] == want {
			res.Correct++
		}
	}

	res.Attach = make([]int, n)
	size := make(map[int32]int32)
	for x, a := range attach {
		res.Attach[net.index[x]] = int(net.index[a])
		size[a]++
	}
	sizes := make([]int32, 0, len(size))
	for a, c := range size {
		res.Superpeers = append(res.Superpeers, int(net.index[a]))
		sizes = append(sizes, c)
	}
	slices.Sort(res.Superpeers)
	res.Rounds = simStat(rounds)
	res.Messages = simStat(queries)
	res.Load = simStat(load)
	res.ClusterSize = simStat(sizes)
	return res, nil
}

// simNet is the network: keys in sorted order and the peers' IDs. Sorted
// positions (int32) name peers inside the simulator.
type simNet struct {
	keys       []Key     // sorted
	top        []uint64  // the leading 64 bits of keys, for speed
	ids        []peer.ID // by sorted position
	index      []int32   // sorted position -> peer number (draw order)
	pos        []int32   // peer number -> sorted position
	seed       uint64
	bucketSize int
}

// simIDPrefix starts an identity multihash of a protobuf Ed25519 public key
// (type 1, 32 bytes), the form of an Ed25519 peer ID ("12D3KooW...").
var simIDPrefix = []byte{0x00, 0x24, 0x08, 0x01, 0x12, 0x20}

const simIDLen = 6 + 32

// simPeerID returns peer i's ID: 28 random bytes then i (big-endian) stand
// in for the public key, so an ID names its peer without a map.
func simPeerID(r *rand.Rand, i int) peer.ID {
	b := make([]byte, simIDLen)
	copy(b, simIDPrefix)
	for j := 6; j < simIDLen-4; j += 4 {
		binary.LittleEndian.PutUint32(b[j:], r.Uint32())
	}
	binary.BigEndian.PutUint32(b[simIDLen-4:], uint32(i))
	return peer.ID(b)
}

// simIndex returns the peer number in an ID made by simPeerID.
func simIndex(id peer.ID) int32 {
	const o = simIDLen - 4
	return int32(uint32(id[o])<<24 | uint32(id[o+1])<<16 | uint32(id[o+2])<<8 | uint32(id[o+3]))
}

func newSimNet(n int, seed uint64, bucketSize int) *simNet {
	r := rand.New(rand.NewPCG(seed, 0x5eed_d47_5e1ec7))
	ids := make([]peer.ID, n)
	keys := make([]Key, n)
	for i := range n {
		ids[i] = simPeerID(r, i)
		keys[i] = KeyOf(ids[i])
	}
	index := make([]int32, n)
	for i := range index {
		index[i] = int32(i)
	}
	slices.SortFunc(index, func(a, b int32) int { return simCompare(&keys[a], &keys[b]) })
	net := &simNet{
		keys:       make([]Key, n),
		top:        make([]uint64, n),
		ids:        make([]peer.ID, n),
		index:      index,
		pos:        make([]int32, n),
		seed:       seed,
		bucketSize: bucketSize,
	}
	for x, i := range index {
		net.keys[x] = keys[i]
		net.top[x] = binary.BigEndian.Uint64(keys[i][:])
		net.ids[x] = ids[i]
		net.pos[i] = int32(x)
	}
	return net
}

func simCompare(a, b *Key) int {
	for i := 0; i < len(a); i += 8 {
		x, y := binary.BigEndian.Uint64(a[i:]), binary.BigEndian.Uint64(b[i:])
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}

// simCPL returns the number of leading bits a and b share.
func simCPL(a, b *Key) int {
	for i := 0; i < len(a); i += 8 {
		if d := binary.BigEndian.Uint64(a[i:]) ^ binary.BigEndian.Uint64(b[i:]); d != 0 {
			return 8*i + bits.LeadingZeros64(d)
		}
	}
	return KeyBits
}

func simBit(k *Key, b int) byte { return k[b>>3] >> (7 - b&7) & 1 }

// split returns the first position in [lo, hi) whose key has bit b set; the
// keys there must share their leading b bits, so they are sorted by bit b.
func (s *simNet) split(lo, hi int32, b int) int32 {
	if b < 64 {
		top, shift := s.top, uint(63-b)
		for lo < hi {
			m := int32(uint32(lo+hi) >> 1)
			if top[m]>>shift&1 == 0 {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return lo
	}
	for lo < hi {
		m := int32(uint32(lo+hi) >> 1)
		if simBit(&s.keys[m], b) == 0 {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// closest returns the position of the key closest to t, by descending the
// binary trie the sorted keys form.
func (s *simNet) closest(t *Key) int32 {
	lo, hi := int32(0), int32(len(s.keys))
	for b := 0; hi-lo > 1 && b < KeyBits; b++ {
		m := s.split(lo, hi, b)
		switch {
		case simBit(t, b) == 0 && m > lo, simBit(t, b) == 1 && m == hi:
			hi = m
		default:
			lo = m
		}
	}
	return lo
}

// simBuckets holds the bucket ranges of one peer x, found by descending
// the binary trie of the sorted keys as far as needed: bucket b, the peers
// sharing exactly b leading bits with x, is positions [lo[b], hi[b]) for
// b < done; the peers sharing done bits with x are [rlo, rhi), and once
// that is x alone every bucket from done on is empty. It also holds
// nearest's sorting space.
type simBuckets struct {
	lo, hi   [KeyBits]int32
	x        int32
	done     int
	rlo, rhi int32
	dist     []simDist
}

// simDist is a peer and the leading 64 bits of its distance to a target.
type simDist struct {
	d uint64
	p int32
}

// startBuckets readies bs for the peer at position x.
func (s *simNet) startBuckets(x int32, bs *simBuckets) {
	bs.x, bs.done, bs.rlo, bs.rhi = x, 0, 0, int32(len(s.keys))
}

// descend finds the ranges of x's buckets up to b (or to the last that is
// not empty).
func (s *simNet) descend(bs *simBuckets, b int) {
	b = min(b, KeyBits-1)
	for bs.done <= b && bs.rhi-bs.rlo > 1 {
		d := bs.done
		m := s.split(bs.rlo, bs.rhi, d)
		if bs.x < m {
			bs.lo[d], bs.hi[d] = m, bs.rhi
			bs.rhi = m
		} else {
			bs.lo[d], bs.hi[d] = bs.rlo, m
			bs.rlo = m
		}
		bs.done++
	}
}

// appendBucket appends the peers that bucket b of peer x holds: all of the
// range if it fits, else a sample of BucketSize drawn by Floyd's algorithm
// from a generator seeded by (seed, x's peer number, b). (Scaling a 64-bit
// draw to [0, j] without rejection is biased by at most j/2^64.)
func (s *simNet) appendBucket(out []int32, x int32, b int, bs *simBuckets) []int32 {
	lo, hi := bs.lo[b], bs.hi[b]
	m, k := int(hi-lo), s.bucketSize
	if m <= k {
		for p := lo; p < hi; p++ {
			out = append(out, p)
		}
		return out
	}
	g := simMix(s.seed ^ simMix(uint64(s.index[x])<<9|uint64(b)))
	start := len(out)
	for j := m - k; j < m; j++ {
		g = simMix(g)
		hi64, _ := bits.Mul64(g, uint64(j+1))
		v := lo + int32(hi64)
		if slices.Contains(out[start:], v) {
			v = lo + int32(j)
		}
		out = append(out, v)
	}
	return out
}

// simMix is splitmix64's finaliser (with its increment), a cheap seeded hash.
func simMix(z uint64) uint64 {
	z += 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// nearest appends the count peers of x's table closest to t, the answer of
// kbucket's NearestPeers: the bucket t falls in, then if short every
// deeper bucket, then shallower buckets one by one until count; then the
// closest count of those. (The order of the answer is not kept sorted.)
func (s *simNet) nearest(out []int32, x int32, t *Key, count int, bs *simBuckets) []int32 {
	s.startBuckets(x, bs)
	c := simCPL(&s.keys[x], t)
	s.descend(bs, c)
	if c < bs.done {
		out = s.appendBucket(out, x, c, bs)
	}
	if len(out) < count {
		s.descend(bs, KeyBits)
		for b := c + 1; b < bs.done; b++ {
			out = s.appendBucket(out, x, b, bs)
		}
	}
	for b := min(c, bs.done) - 1; b >= 0 && len(out) < count; b-- {
		out = s.appendBucket(out, x, b, bs)
	}
	if len(out) <= count {
		return out
	}
	// Sort by distance to t: its leading 64 bits, then (for keys that
	// share them, which practically never happens) the whole key.
	t64 := binary.BigEndian.Uint64(t[:])
	ds := bs.dist[:0]
	for _, p := range out {
		ds = append(ds, simDist{s.top[p] ^ t64, p})
	}
	slices.SortFunc(ds, func(a, b simDist) int {
		switch {
		case a.d < b.d:
			return -1
		case a.d > b.d:
			return 1
		}
		da, db := Xor(s.keys[a.p], *t), Xor(s.keys[b.p], *t)
		return simCompare(&da, &db)
	})
	out = out[:count]
	for i := range out {
		out[i] = ds[i].p
	}
	bs.dist = ds
	return out
}

// simDriver runs lookups one after another, reusing its buffers.
type simDriver struct {
	net   *simNet
	k     int
	alpha int
	load  []int32 // queries answered, by position
	// heard[p] == epoch when the running lookup has heard of peer p: the
	// driver passes on only new peers, which Lookup would otherwise find
	// in its map and ignore, to spare it the map lookups.
	heard []int32
	epoch int32
	bs    simBuckets
	near  []int32
	ids   []peer.ID
	queue []simQuery
}

type simQuery struct {
	id peer.ID
	at int32 // time of the answer
}

func (s *simNet) newDriver(k, alpha int, load []int32) *simDriver {
	return &simDriver{net: s, k: k, alpha: alpha, load: load, heard: make([]int32, len(s.keys))}
}

// answer returns the IDs of what peer x answers for target t, less the
// asker (overlay drops itself from answers) and the peers the lookup has
// already heard of.
func (d *simDriver) answer(x int32, t *Key) []peer.ID {
	d.near = d.net.nearest(d.near[:0], x, t, d.net.bucketSize, &d.bs)
	d.ids = d.ids[:0]
	for _, p := range d.near {
		if d.heard[p] != d.epoch {
			d.heard[p] = d.epoch
			d.ids = append(d.ids, d.net.ids[p])
		}
	}
	return d.ids
}

// run performs the lookup of the peer at position x and returns where it
// ended, the queries it sent and its rounds.
func (d *simDriver) run(x int32) (end, queries, rounds int32) {
	s := d.net
	t := s.keys[x].Cluster(d.k)
	d.epoch++
	d.heard[x] = d.epoch
	l := NewLookup(t, s.ids[x], d.answer(x, &t), Resiliency, d.alpha)
	var now int32
	q := d.queue[:0]
	head := 0
	for !l.Done() {
		for _, p := range l.Next() {
			q = append(q, simQuery{p, now + 1})
			queries++
		}
		if head == len(q) {
			break // nothing in flight and nothing to ask: Done must hold
		}
		a := q[head]
		head++
		now = a.at
		p := s.pos[simIndex(a.id)]
		d.load[p]++
		l.Answered(a.id, d.answer(p, &t))
	}
	d.queue = q
	return s.pos[simIndex(l.Result()[0])], queries, now
}
