package geometric

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// Token is one of the S tokens. Num names it (0..S-1); Seq orders reports
// of its position: of two reports about one token, the one with the higher
// Seq is the newer. Every pass adds one to Seq. Its high 32 bits count the
// placements of the token (0 for the initial one, one more for every
// re-homing: Rehomed) and its low 32 bits the passes since (Passes), which
// set how cool the token is (Config.Cooling).
type Token struct {
	Num int
	Seq uint64
}

// Passes returns the number of passes of t since it was placed.
func (t Token) Passes() int { return int(uint32(t.Seq)) }

// Rehomed returns token num as placed again by a re-homing, newer than any
// report whose Seq is below after: the next placement, with no passes.
func Rehomed(num int, after uint64) Token {
	return Token{Num: num, Seq: (after>>32 + 1) << 32}
}

// Position is a report, spread by gossip, that Holder holds Token at Coord.
type Position struct {
	Token  Token
	Holder ID
	Coord  *coordinate.Coordinate
}

// Peer is a peer and its coordinate, as a holder knows them.
type Peer struct {
	ID    ID
	Coord *coordinate.Coordinate
}

// Output is a decision of a Holder for its driver to carry out: Pass,
// Release, Promote or Demote.
type Output interface{ isOutput() }

// Pass asks the driver to hand Token to peer To. The holder keeps the token
// (but makes no further decision) until the driver reports the outcome with
// PassDone. Token.Seq is already advanced for the recipient.
type Pass struct {
	Token Token
	To    ID
	// Gain is the decrease of the token's potential energy the holder
	// expects from the pass, in seconds (zero for a pass made on leaving).
	Gain float64
}

// Release reports that the holder is leaving with a token and had no
// neighbour to pass it to (or the pass failed). The driver re-homes it: the
// peer chosen by Rehome receives Token{Num, Seq + 1}, so that the number of
// tokens stays S.
type Release struct{ Token Token }

// Promote reports that the holder has held Token for the dwell time and is
// now a superpeer.
type Promote struct{ Token int }

// Demote reports that the holder is no longer a superpeer: it passed its
// token on, lost it to a newer holder, or is leaving.
type Demote struct{ Token int }

func (Pass) isOutput()    {}
func (Release) isOutput() {}
func (Promote) isOutput() {}
func (Demote) isOutput()  {}

// Score is the placement score of peer id for the round seed: the first 8
// bytes, big-endian, of SHA-256(seed as 8 big-endian bytes || id).
func Score(seed uint64, id ID) uint64 {
	h := sha256.New()
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(id))
	return binary.BigEndian.Uint64(h.Sum(nil))
}

// InitialHolders places s tokens without a coordinator: every peer computes
// Score(seed, id) for the peers it knows, and the s peers with the smallest
// scores hold the tokens, token i going to the i-th smallest (ties, which
// need a SHA-256 collision on 64 bits, are broken by ID). Peers are distinct,
// so no peer gets two tokens. Peers that know the same set agree on the
// result; while membership is still spreading they may not, and the Seq rule
// of Observe settles any duplicate. Duplicate IDs in peers are counted once.
// It fails with ErrConfig when s < 1 or s exceeds the number of distinct
// peers.
func InitialHolders(seed uint64, peers []ID, s int) ([]ID, error) {
	ids := slices.Clone(peers)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if s < 1 || s > len(ids) {
		return nil, fmt.Errorf("%w: Tokens = %d, want 1 <= Tokens <= %d (the number of distinct peers)", ErrConfig, s, len(ids))
	}
	type scored struct {
		id    ID
		score uint64
	}
	sc := make([]scored, len(ids))
	for i, id := range ids {
		sc[i] = scored{id, Score(seed, id)}
	}
	slices.SortFunc(sc, func(a, b scored) int {
		return cmp.Or(cmp.Compare(a.score, b.score), cmp.Compare(a.id, b.id))
	})
	out := make([]ID, s)
	for i := range out {
		out[i] = sc[i].id
	}
	return out, nil
}

// Rehome chooses the peer that picks up a released token: among peers that
// do not hold a token (holding), the one with the smallest
// Score(seed^token, id), ties by ID. It returns "" when every peer holds one.
func Rehome(seed uint64, token int, peers []ID, holding map[ID]bool) ID {
	var best ID
	var bestScore uint64
	for _, id := range peers {
		if holding[id] || id == "" {
			continue
		}
		s := Score(seed^uint64(token), id)
		if best == "" || s < bestScore || (s == bestScore && id < best) {
			best, bestScore = id, s
		}
	}
	return best
}

// Holder is the token state machine of one peer. It runs the dynamics
// described in the package documentation: input through SetCoordinate,
// SetNeighbours, SetPeers, Observe, Receive, PassDone, Leave and Tick (with
// an explicit now), output as Output values. It uses no clock, goroutine or
// randomness and is not safe for concurrent use.
type Holder struct {
	cfg   Config
	base  Config // cfg at scale 1 (SetScale)
	self  ID
	coord *coordinate.Coordinate

	neighbours []Peer
	peers      []Peer
	space      *PeerSpace       // the indexed form of peers, when set by SetPeerSpace
	population int              // N for the attraction's weight, when more than the peers known (SetPopulation)
	heard      map[int]Position // newest position of every other token

	held    bool
	token   Token
	since   time.Time
	super   bool
	passing bool
	left    bool
	tried   []ID // on leaving, the neighbours a pass was tried to
	// stale is set when an input changed since the last decision to stay.
	stale bool
	// pinned: the token stays for the coordinates' forces (Pin).
	pinned bool
}

// NewHolder returns the state machine of peer self. Zero fields of cfg take
// their defaults; the others are validated.
func NewHolder(self ID, cfg Config) (*Holder, error) {
	if self == "" {
		return nil, fmt.Errorf("%w: peer ID is empty", ErrConfig)
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Holder{cfg: cfg, base: cfg, self: self, heard: map[int]Position{}}, nil
}

// SetScale sets the scale of the network the holder's decisions are made
// at: Config's lengths (Range, Softening, Margin, PromotedMargin) apply
// multiplied by f (Config.Scaled). The force law is then the same on a
// network whose RTTs are all f times those the Config was set for. f of
// zero, below zero or not finite is taken as 1.
func (h *Holder) SetScale(f float64) { h.cfg = h.base.Scaled(f) }

// SetCoordinate sets this peer's own coordinate. It is rejected, and the old
// one kept, when it fails Valid's checks (of any dimensionality, but the
// same as the one before).
func (h *Holder) SetCoordinate(c *coordinate.Coordinate) error {
	dims := Dimensions
	switch {
	case h.coord != nil:
		dims = len(h.coord.Vec)
	case c != nil:
		dims = len(c.Vec)
	}
	if err := validate(c, dims); err != nil {
		return err
	}
	h.coord = c.Clone()
	h.stale = true
	return nil
}

// SetNeighbours sets the peers a token may be passed to. Peers known to hold
// a token, this peer itself and peers without a usable coordinate are
// skipped when choosing.
func (h *Holder) SetNeighbours(ns []Peer) {
	h.neighbours = slices.Clone(ns)
	h.stale = true
}

// SetPeers sets the peers whose coordinates the attraction term uses (see
// the package documentation); this peer may be among them. Without peers,
// or with a negative Config.Attraction, only repulsion acts. The holder
// keeps ps, which may be large and shared between holders: the caller must
// not modify it afterwards.
func (h *Holder) SetPeers(ps []Peer) {
	h.peers, h.space = ps, nil
	h.stale = true
}

// SetPopulation sets N, the number of peers in the swarm, for the
// attraction's weight A·S/N, when the holder knows the coordinates of
// only some of them (SetPeers): a superpeer that knows its own cluster's
// members (overlay/node) and learns N from the superpeers' loads. The
// pull on a token then stays about A, as with every peer known, rather
// than S times that. Zero (the default), or a number below the peers
// known, takes the number of peers known.
func (h *Holder) SetPopulation(n int) {
	if n != h.population {
		h.population = max(n, 0)
		h.stale = true
	}
}

// SetPeerSpace is SetPeers with the peers of s, which many holders may
// share: the holder then computes the attraction term on s's index, with
// the same decisions as SetPeers(the peers of s) at a fraction of the cost
// (see PeerSpace).
func (h *Holder) SetPeerSpace(s *PeerSpace) {
	h.peers, h.space = s.peers, s
	h.stale = true
}

// Holding returns the token this peer holds, if any. A token being passed
// is still held until PassDone.
func (h *Holder) Holding() (Token, bool) { return h.token, h.held }

// Superpeer reports whether this peer has been promoted and still holds its
// token.
func (h *Holder) Superpeer() bool { return h.super }

// Since returns when the holder took the token it holds (received,
// placed or taken over), and whether it holds one.
func (h *Holder) Since() (time.Time, bool) { return h.since, h.held }

// Position returns the report to gossip about the token this peer holds, or
// false when it holds none (or has no coordinate yet).
func (h *Holder) Position() (Position, bool) {
	if !h.held || h.coord == nil {
		return Position{}, false
	}
	return Position{Token: h.token, Holder: h.self, Coord: h.coord.Clone()}, true
}

// Observe records a token position heard by gossip. A report that fails
// Valid's checks, or that is older (by Seq) than one already heard for that
// token, is ignored. A report that this peer's own token is held elsewhere
// with a higher Seq, or with the same Seq by a smaller ID (a duplicate, for
// instance from disagreeing initial placements), means this peer has lost
// it: it drops the token, outputting Demote if it was a superpeer.
func (h *Holder) Observe(p Position) []Output {
	if p.Holder == h.self || p.Coord == nil || validate(p.Coord, len(p.Coord.Vec)) != nil {
		return nil
	}
	old, ok := h.heard[p.Token.Num]
	if ok && old.Token.Seq > p.Token.Seq {
		return nil
	}
	if h.held && p.Token.Num == h.token.Num {
		if h.passing || p.Token.Seq < h.token.Seq || (p.Token.Seq == h.token.Seq && p.Holder > h.self) {
			return nil // ours is newer, or it is the pass we are making
		}
		h.heard[p.Token.Num] = p
		return h.drop()
	}
	if !ok || old.Holder != p.Holder || old.Token.Seq != p.Token.Seq || !sameCoord(old.Coord, p.Coord) {
		h.stale = true
	}
	h.heard[p.Token.Num] = p
	return nil
}

// Receive hands token t to this peer at time now; its holding time starts
// (a token with Settled passes or more, handed over, makes it a superpeer
// at once: Handover). It fails, and the sender should keep the token (PassDone(false)), when this
// peer already holds a token, is leaving, or has heard of a newer holder of
// t (a replayed pass).
func (h *Holder) Receive(t Token, now time.Time) error {
	switch {
	case h.held:
		return fmt.Errorf("geometric: peer %q cannot take token %d: it holds token %d", h.self, t.Num, h.token.Num)
	case h.left:
		return fmt.Errorf("geometric: peer %q cannot take token %d: it is leaving", h.self, t.Num)
	}
	if old, ok := h.heard[t.Num]; ok && old.Token.Seq >= t.Seq {
		return fmt.Errorf("geometric: peer %q refuses token %d at seq %d: %q holds it at seq %d", h.self, t.Num, t.Seq, old.Holder, old.Token.Seq)
	}
	h.held, h.token, h.since, h.super, h.passing, h.stale, h.pinned = true, t, now, false, false, true, false
	if t.Passes() >= Settled { // handed over (Handover): not in transit
		h.super = true
	}
	delete(h.heard, t.Num)
	return nil
}

// Yield gives up the token this peer holds, when its driver found that
// another peer holds it by a better right (for overlay/node, the holder
// that this peer's re-homing or takeover replaced turned out alive); it
// outputs Demote if this peer was a superpeer. It does nothing while a
// pass is in flight, or when no token is held.
func (h *Holder) Yield() []Output {
	if !h.held || h.passing {
		return nil
	}
	return h.drop()
}

// Settled is the pass count that a hand-over (Handover) adds to a token:
// a token handed over by the search on measured RTTs (swap.go) is where
// the measurements put it, not in transit. Cooled by that many passes, it
// no longer moves for the coordinates' forces (its margin overflows to
// +Inf), and a peer that receives it is promoted at once (Receive).
const Settled = 1 << 16

// Handover passes the token to peer to at once, as the search on measured
// RTTs decided (Swap or Relocate): a Pass with Settled passes more, which
// the recipient takes promoted. The driver reports the outcome with
// PassDone, as for any pass. It outputs nothing when no token is held, a
// pass is in flight, this peer is leaving, or to is this peer; the
// decisions of the token dynamics (Tick) wait while it is in flight.
func (h *Holder) Handover(to ID) []Output {
	if !h.held || h.passing || h.left || to == h.self || to == "" || uint64(h.token.Passes())+Settled+1 >= 1<<32 {
		return nil
	}
	h.passing = true
	return []Output{Pass{Token: Token{h.token.Num, h.token.Seq + Settled + 1}, To: to}}
}

// Pin keeps the token held where it is as far as the coordinates' forces
// go (Tick no longer moves it), until it leaves this peer: a search on
// measured RTTs (swap.go) judged this peer, and measurements outrank the
// coordinates. Leave, Handover and Yield work as before.
func (h *Holder) Pin() { h.pinned = h.held }

// Pinned reports whether the token held is pinned (Pin).
func (h *Holder) Pinned() bool { return h.held && h.pinned }

// Takeover hands token t to this peer as Receive does, and promotes it at
// once (output Promote): the cluster of t's holder, which is gone, elected
// this peer to take its place, and its members need a superpeer now, not
// after a dwell time. It fails as Receive does.
func (h *Holder) Takeover(t Token, now time.Time) ([]Output, error) {
	if err := h.Receive(t, now); err != nil {
		return nil, err
	}
	h.super = true
	return []Output{Promote{Token: t.Num}}, nil
}

// PassDone reports the outcome of the last Pass. When ok, the token is gone
// (Demote if this peer was a superpeer). When not, this peer keeps it with
// its holding time unbroken, unless it is leaving, in which case it tries
// the next nearest eligible neighbour (leaveTries neighbours in all), and
// then outputs Release.
func (h *Holder) PassDone(ok bool) []Output {
	if !h.passing {
		return nil
	}
	h.passing = false
	if ok {
		return h.drop()
	}
	if h.left {
		if p, ok := h.leavePass(); ok {
			return []Output{p}
		}
		h.held = false
		return []Output{Release{Token: h.token}}
	}
	h.stale = true // try again at the next tick
	return nil
}

// leaveTries is how many neighbours a leaving holder tries to pass its
// token to before it releases it: the nearest may refuse it, or its driver
// may distrust it (overlay/node's liar check).
const leaveTries = 3

// leavePass is a leaving holder's pass to the nearest eligible neighbour
// not tried yet, if any and while tries remain; it marks the pass in
// flight.
func (h *Holder) leavePass() (Pass, bool) {
	if len(h.tried) >= leaveTries {
		return Pass{}, false
	}
	best, bestD := -1, math.Inf(1)
	for i, n := range h.neighbours {
		if h.eligible(n) && !slices.Contains(h.tried, n.ID) {
			if d := Distance(h.coord, n.Coord); d < bestD {
				best, bestD = i, d
			}
		}
	}
	if best < 0 {
		return Pass{}, false
	}
	h.passing = true
	h.tried = append(h.tried, h.neighbours[best].ID)
	return Pass{Token: Token{h.token.Num, h.token.Seq + 1}, To: h.neighbours[best].ID}, true
}

// Leave is called when this peer leaves the overlay. A superpeer outputs
// Demote. A holder passes its token to its nearest eligible neighbour (and
// when that pass fails, to the next nearest: leaveTries in all), or outputs
// Release when it has none left to try. Afterwards the machine takes no
// token and makes no decision.
func (h *Holder) Leave() []Output {
	if h.left {
		return nil
	}
	h.left = true
	if !h.held {
		return nil
	}
	var out []Output
	if h.super {
		h.super = false
		out = append(out, Demote{Token: h.token.Num})
	}
	if h.passing {
		return out // the pending Pass carries it away; PassDone(false) tries another or releases it
	}
	if p, ok := h.leavePass(); ok {
		return append(out, p)
	}
	h.held = false
	return append(out, Release{Token: h.token})
}

// Tick advances the machine to time now. A holder not waiting for a pass
// decides whether to move its token (see the package documentation) and, if
// so, outputs Pass. Otherwise, once it has held the token for Config.Dwell,
// it outputs Promote, once.
func (h *Holder) Tick(now time.Time) []Output {
	if !h.held || h.passing || h.left || h.coord == nil {
		return nil
	}
	if h.stale && !h.pinned && now.Sub(h.since) >= h.cfg.MinHold {
		h.stale = false
		if to, gain, ok := h.move(); ok {
			h.passing = true
			return []Output{Pass{Token: Token{h.token.Num, h.token.Seq + 1}, To: to, Gain: gain}}
		}
	}
	if !h.super && now.Sub(h.since) >= h.cfg.Dwell {
		h.super = true
		return []Output{Promote{Token: h.token.Num}}
	}
	return nil
}

func (h *Holder) drop() []Output {
	h.held, h.passing = false, false
	if h.super {
		h.super = false
		return []Output{Demote{Token: h.token.Num}}
	}
	return nil
}

// eligible reports whether a token may be passed to n. Without a coordinate
// of its own (a token can arrive before the first one) a holder has no
// direction to pass it in, so no neighbour is eligible.
func (h *Holder) eligible(n Peer) bool {
	if h.coord == nil || n.ID == h.self || n.ID == "" || n.Coord == nil || len(n.Coord.Vec) != len(h.coord.Vec) || !n.Coord.IsValid() {
		return false
	}
	for _, p := range h.heard {
		if p.Holder == n.ID {
			return false
		}
	}
	return true
}

// eligibleNeighbours returns, for every neighbour, eligible(neighbour),
// going through the heard positions once instead of once per neighbour.
func (h *Holder) eligibleNeighbours() []bool {
	ok := make([]bool, len(h.neighbours))
	at := make(map[ID][]int, len(h.neighbours))
	for i, n := range h.neighbours {
		if n.ID == h.self || n.ID == "" || n.Coord == nil || len(n.Coord.Vec) != len(h.coord.Vec) || !n.Coord.IsValid() {
			continue
		}
		ok[i] = true
		at[n.ID] = append(at[n.ID], i)
	}
	for _, p := range h.heard {
		for _, i := range at[p.Holder] {
			ok[i] = false
		}
	}
	return ok
}

// move returns the neighbour to pass the token to, if any, and the energy
// the pass saves; see the package documentation for the rule.
func (h *Holder) move() (ID, float64, bool) {
	f := h.field()
	self := Peer{h.self, h.coord}
	force := f.force(self)
	margin := h.cfg.Margin
	if h.super {
		margin = h.cfg.PromotedMargin
	}
	here := f.energy(self)
	limit := here - h.cfg.cooled(margin, h.token)
	steep := norm(force) > h.cfg.Threshold
	eligible := h.eligibleNeighbours()
	tried := make([]bool, len(h.neighbours))
	if steep {
		// The rule takes, of the improving neighbours with a positive
		// cosine with the force, the one with the largest (the first in
		// neighbour order among equals): try them in that order and stop
		// at the first that improves.
		type along struct {
			i int
			c float64
		}
		var cs []along
		for i, n := range h.neighbours {
			if c := 0.0; eligible[i] {
				if c = cosine(force, n.Coord.Vec, h.coord.Vec); c > 0 {
					cs = append(cs, along{i, c})
				}
			}
		}
		slices.SortStableFunc(cs, func(a, b along) int { return cmp.Compare(b.c, a.c) })
		for _, a := range cs {
			tried[a.i] = true
			if e := f.energy(h.neighbours[a.i]); e <= limit {
				if f.cells != nil {
					f.prune(self, h.neighbours)
				}
				return h.neighbours[a.i].ID, here - e, true
			}
		}
	}
	// Otherwise the improving neighbour with the least energy (the first
	// in neighbour order among equals), if any: the ones tried above do
	// not improve.
	best, bestE := -1, 0.0
	jump, jumpE := -1, limit
	for i, n := range h.neighbours {
		if !eligible[i] || tried[i] {
			continue
		}
		e := f.energy(n)
		if e > limit {
			continue
		}
		if e < jumpE || jump < 0 {
			jump, jumpE = i, e
		}
	}
	if best < 0 {
		best, bestE = jump, jumpE
	}
	if f.cells != nil {
		f.prune(self, h.neighbours)
	}
	if best < 0 {
		return "", 0, false
	}
	return h.neighbours[best].ID, here - bestE, true
}

// cooled returns margin, in seconds, as raised for a token that has made
// t.Passes() passes (Config.Cooling); +Inf once it overflows.
func (c Config) cooled(margin time.Duration, t Token) float64 {
	if c.Cooling < 0 || t.Passes() <= c.Cooling {
		return margin.Seconds()
	}
	return margin.Seconds() * math.Exp2(float64(t.Passes()-c.Cooling))
}

// field is what a holder knows when it decides: the positions of the other
// tokens and the coordinates of the known peers.
type field struct {
	cfg    Config
	others []Position
	peers  []Peer
	near   []float64 // estimated RTT from peers[i] to the nearest other token
	share  float64   // A·S/N
	charge float64   // ρ²/len(others): the repulsion is a mean over the other tokens

	// With a PeerSpace, peers and near stay empty: the attraction term
	// is summed over the cell of the candidate only (PeerSpace.cached),
	// in the order of the peer list, and energies are lowered by the same
	// constant A·S/N·Σ_p near(p), which no decision depends on.
	space *PeerSpace
	own   int               // the token this holder holds
	cells map[ID]*cellCache // of the candidates, kept from one decision to the next
	buf   []cellPeer        // cellOf's answer, until the next call
}

func (h *Holder) field() *field {
	f := &field{cfg: h.cfg}
	dims := len(h.coord.Vec)
	for _, num := range slices.Sorted(maps.Keys(h.heard)) {
		if p := h.heard[num]; len(p.Coord.Vec) == dims {
			f.others = append(f.others, p)
		}
	}
	if len(f.others) > 0 { // see the package documentation for why a mean
		rho := f.cfg.Range.Seconds()
		f.charge = rho * rho / float64(len(f.others))
	}
	if h.cfg.Attraction <= 0 {
		return f
	}
	if s := h.space; s != nil && s.usable && s.dims == dims && s.Len() > 0 && len(f.others) > 0 {
		ts := make([]Position, 0, len(f.others)+1)
		ts = append(ts, f.others...)
		s.sync(append(ts, Position{Token: h.token, Holder: h.self, Coord: h.coord}))
		f.space, f.own, f.cells = s, h.token.Num, s.cellsOf(h.token.Num)
		f.share = h.cfg.Attraction * float64(len(f.others)+1) / float64(s.Len())
		return f
	}
	for _, p := range h.peers {
		if p.Coord == nil || len(p.Coord.Vec) != dims || !p.Coord.IsValid() {
			continue
		}
		near := math.Inf(1)
		for _, o := range f.others {
			near = min(near, rtt(p, Peer{o.Holder, o.Coord}))
		}
		f.peers = append(f.peers, p)
		f.near = append(f.near, near)
	}
	if len(f.peers) > 0 {
		f.share = h.cfg.Attraction * float64(len(f.others)+1) / float64(max(len(f.peers), h.population))
	}
	return f
}

// rtt is the estimated RTT, in seconds, between two peers: 0 from a peer to
// itself, else Distance.
func rtt(a, b Peer) float64 {
	if a.ID == b.ID {
		return 0
	}
	return Distance(a.Coord, b.Coord)
}

// energy is the potential energy, in seconds, of the token if x held it.
// The repulsion sees the Vec parts only; the attraction, the full Distance.
func (f *field) energy(x Peer) float64 {
	eps := f.cfg.Softening.Seconds()
	u := 0.0
	for _, t := range f.others {
		u += f.charge / (dist(x.Coord.Vec, t.Coord.Vec) + eps)
	}
	if f.space != nil {
		s := 0.0
		for _, c := range f.cellOf(x) {
			s += c.d - c.near
		}
		u += f.share * s
	} else if f.share > 0 {
		s := 0.0
		for i, p := range f.peers {
			s += min(rtt(x, p), f.near[i])
		}
		u += f.share * s
	}
	return u
}

// force is -∇U at x with respect to x's Vec (dimensionless: seconds of
// energy per second of distance).
func (f *field) force(x Peer) []float64 {
	eps := f.cfg.Softening.Seconds()
	out := make([]float64, len(x.Coord.Vec))
	for _, t := range f.others {
		d := dist(x.Coord.Vec, t.Coord.Vec)
		addUnit(out, x.Coord.Vec, t.Coord.Vec, f.charge/((d+eps)*(d+eps)))
	}
	if f.space != nil {
		for _, p := range f.cellOf(x) { // in the order of the peer list, as below
			addUnit(out, f.space.vecOf(p.k), x.Coord.Vec, f.share)
		}
		return out
	}
	for i, p := range f.peers {
		if rtt(x, p) < f.near[i] {
			addUnit(out, p.Coord.Vec, x.Coord.Vec, f.share)
		}
	}
	return out
}

// prune forgets the cells of all but the candidates self and ns.
func (f *field) prune(self Peer, ns []Peer) {
	for id := range f.cells {
		if id != self.ID && !slices.ContainsFunc(ns, func(n Peer) bool { return n.ID == id }) {
			delete(f.cells, id)
		}
	}
}

// cellOf returns the peers that x would take from the other tokens, in
// the order of the peer list (PeerSpace.cached), in a buffer that the
// next call overwrites.
func (f *field) cellOf(x Peer) []cellPeer {
	c := f.cells[x.ID]
	if c == nil {
		c = &cellCache{}
		f.cells[x.ID] = c
	}
	f.buf = f.space.cached(x, f.own, c, f.buf[:0])
	return f.buf
}

// addUnit adds to f the unit vector from b towards a, scaled by k. It adds
// nothing when a and b coincide.
func addUnit(f, a, b []float64, k float64) {
	d := dist(a, b)
	if d <= coincide {
		return
	}
	for i := range f {
		f[i] += k * (a[i] - b[i]) / d
	}
}

// cosine returns the cosine of the angle between f and the step from x to y.
func cosine(f, y, x []float64) float64 {
	dot, ny := 0.0, 0.0
	for i := range f {
		s := y[i] - x[i]
		dot += f[i] * s
		ny += s * s
	}
	nf := norm(f)
	if nf == 0 || ny == 0 {
		return 0
	}
	return dot / (nf * math.Sqrt(ny))
}

func sameCoord(a, b *coordinate.Coordinate) bool {
	return slices.Equal(a.Vec, b.Vec) && a.Height == b.Height && a.Adjustment == b.Adjustment
}
