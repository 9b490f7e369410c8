package overlay

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/serf/coordinate"
	"github.com/libp2p/go-libp2p/core/event"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/geometric"
	"github.com/superpeer/superpeer/gossip"
)

// Status is a node's view of the overlay as served by a StatusServer on
// /status, in JSON. Peer IDs are in their usual string form, keys in hex,
// durations in milliseconds.
type Status struct {
	// ID is the node's peer ID; Network the overlay's name (Config.Network)
	// and Strategy its superpeer selection (StrategyDHT or
	// StrategyGeometric).
	ID       string `json:"id"`
	Network  string `json:"network"`
	Strategy string `json:"strategy"`
	Role     Role   `json:"role"`
	// Private says the node is not reachable from outside and may not be
	// a superpeer (Config.Reachability).
	Private bool          `json:"private"`
	Cluster ClusterStatus `json:"cluster"`
	// Superpeer is the cluster's superpeer, with its addresses; its ID is
	// empty until the first evaluation.
	Superpeer PeerStatus `json:"superpeer"`
	// Members are the cluster's members as in State.Members.
	Members      []string     `json:"members"`
	SizeEstimate SizeEstimate `json:"size_estimate"`
	// Coord is the node's network coordinate (geometric strategy only).
	Coord *Coord `json:"coord,omitempty"`
	// Token is State.Token with the geometric strategy (-1: no token), and
	// absent with the DHT strategy.
	Token *int `json:"token,omitempty"`
	// Evaluations, Lookups and LookupQueries are State's counters.
	Evaluations   uint64 `json:"evaluations"`
	Lookups       uint64 `json:"lookups"`
	LookupQueries uint64 `json:"lookup_queries"`
	// RTTToSuperpeer is the RTT to the superpeer when known (see RTT);
	// absent for a superpeer and before anything was measured.
	RTTToSuperpeer *RTT `json:"rtt_to_superpeer,omitempty"`
	// Election is present when the node runs one (Config.Election).
	Election *ElectionStatus `json:"election,omitempty"`
	// Membership is the cluster-scoped membership (DHT strategy): absent
	// with the geometric strategy, whose membership is the global topic.
	Membership *MembershipStatus `json:"membership,omitempty"`
	// Refused counts the messages refused on the overlay's stream
	// protocols, by protocol and reason (see wire.go), and Bans the peers
	// banned for sending them.
	Refused map[string]map[string]uint64 `json:"refused,omitempty"`
	Bans    uint64                       `json:"bans"`
	// Distrusted counts the times a peer's claimed coordinate disagreed
	// with the RTTs measured to it, so no token went to it, out of
	// VetChecks claims checked (geometric strategy; see overlay/node's
	// geovet.go: from several vantage points).
	Distrusted uint64 `json:"distrusted,omitempty"`
	VetChecks  uint64 `json:"vet_checks,omitempty"`
	// Peers are the peers the node knows of (its membership view, its own
	// cluster and superpeer always included), sorted by ID, for the map.
	Peers []PeerStatus `json:"peers"`
	// Time is when the status was taken.
	Time time.Time `json:"time"`
}

// ClusterStatus names a node's cluster.
type ClusterStatus struct {
	// Prefix is the cluster's k-bit prefix (empty for k = 0); with the
	// geometric strategy, "sp-" and the end of the superpeer's ID.
	Prefix string `json:"prefix"`
	K      int    `json:"k"`
	// Key is the cluster key in hex (DHT strategy).
	Key string `json:"key"`
	// TargetSuperpeers is S, the number of superpeers aimed at.
	TargetSuperpeers int `json:"target_superpeers"`
}

// SizeEstimate is the network-size estimate and which source it came from
// (see dhtselect.EstimateSize).
type SizeEstimate struct {
	N      int    `json:"n"`
	Source string `json:"source"`
}

// PeerStatus is one peer as the node knows it. Fields the node does not
// know are left out.
type PeerStatus struct {
	ID    string   `json:"id"`
	Addrs []string `json:"addrs,omitempty"`
	Role  Role     `json:"role,omitempty"`
	// Cluster is the peer's cluster prefix, as it announced it (DHT
	// strategy), or the node's own cluster's name for its members.
	Cluster string `json:"cluster,omitempty"`
	// Superpeer is the peer's superpeer when known: for the DHT strategy
	// the peer of its cluster that announces itself as superpeer, for the
	// geometric strategy only in the node's own cluster.
	Superpeer string `json:"superpeer,omitempty"`
	// Coord is the peer's coordinate (geometric strategy).
	Coord *Coord `json:"coord,omitempty"`
	// Self marks the node itself.
	Self bool `json:"self,omitempty"`
}

// Coord is a network coordinate (hashicorp/serf's, in seconds).
type Coord struct {
	Vec        []float64 `json:"vec"`
	Height     float64   `json:"height"`
	Error      float64   `json:"error"`
	Adjustment float64   `json:"adjustment"`
}

// RTT is a round-trip time and how it was obtained: "peerstore" is the
// host's moving average of measured RTTs (kad-dht requests and pings), and
// "coordinates" the RTT the network coordinates predict (geometric
// strategy, before any measurement).
type RTT struct {
	MS     float64 `json:"ms"`
	Source string  `json:"source"`
}

// ElectionStatus is the node's cluster election: ElectionStats, and the
// events a StatusServer has seen since it started.
type ElectionStatus struct {
	Algorithm string `json:"algorithm"`
	Leader    string `json:"leader,omitempty"`
	Role      string `json:"role"`
	Term      uint64 `json:"term"`
	// TimeoutMS is the failure-detection timeout.
	TimeoutMS float64 `json:"timeout_ms"`
	// Lookup is the DHT lookup's last answer for the cluster key.
	Lookup  string            `json:"lookup,omitempty"`
	Sent    map[string]uint64 `json:"sent"`
	Dropped uint64            `json:"dropped"`
	// Throttled counts the messages the node did not send because they
	// were over its budget for their peer.
	Throttled uint64 `json:"throttled"`
	// Elections and Losses count the EvtSuperpeerElected and
	// EvtSuperpeerLost events seen, and Last is the latest
	// EvtSuperpeerElected; all three are a StatusServer's, since it
	// started (Node.Status leaves them zero).
	Elections uint64        `json:"elections"`
	Losses    uint64        `json:"losses"`
	Last      *LastElection `json:"last,omitempty"`
}

// LastElection is the latest leader the node's election named, and when
// the StatusServer saw it named (for a leader named before the server
// started, the server's start).
type LastElection struct {
	Time   time.Time `json:"time"`
	Term   uint64    `json:"term"`
	Leader string    `json:"leader"`
}

// MembershipStatus is what the node knows and did in the cluster-scoped
// membership (DHT strategy; register.go, cluster.go).
type MembershipStatus struct {
	// Serving says the node keeps its cluster's registrations (it is the
	// superpeer, or the candidate its lookup ended at).
	Serving bool `json:"serving"`
	// Registrar is the peer the node registers with (its superpeer, or
	// before it has one the peer its lookup ended at); empty: none.
	Registrar string `json:"registrar,omitempty"`
	// Registry is the number of registrations the node holds while it
	// serves, itself included (0 otherwise).
	Registry int `json:"registry"`
	// Roster is the number of peers in the roster the node holds from its
	// registrar (the former rosters' entries within their TTL included,
	// the node itself not).
	Roster int `json:"roster"`
	// Sent counts the registrations the node sent, by the answer's status
	// (unchanged, delta and snapshot: accepted; not_superpeer,
	// wrong_cluster, full, too_soon, bad_record, crowded, not_a_member:
	// refused; need_record: asked for the record; failed: no answer).
	// too_soon is also a full read of the roster over its budget.
	Sent map[string]uint64 `json:"registrations_sent,omitempty"`
	// Received counts the registrations the node answered, by status.
	Received map[string]uint64 `json:"registrations_received,omitempty"`
	// Backbone is the number of other superpeers' summaries the node
	// holds from the backbone (while it serves).
	Backbone int `json:"backbone"`
}

// slug is a register status as a metric label and a JSON key.
func (s regStatus) slug() string {
	switch s {
	case regNotSuperpeer:
		return "not_superpeer"
	case regWrongCluster:
		return "wrong_cluster"
	case regFull:
		return "full"
	case regTooSoon:
		return "too_soon"
	case regBadRecord:
		return "bad_record"
	case regNeedRecord:
		return "need_record"
	case regCrowded:
		return "crowded"
	case regNotMember:
		return "not_a_member"
	}
	return strings.ReplaceAll(s.String(), " ", "_")
}

// MembershipStatus is Status's Membership alone, without the rest of the
// status (a testnet's node process reports it every 50 ms).
func (n *Node) MembershipStatus() *MembershipStatus { return n.membershipStatus() }

// membershipStatus is the cluster-scoped membership's status, or nil
// with the geometric strategy.
func (n *Node) membershipStatus() *MembershipStatus {
	c := n.cm
	if c == nil {
		return nil
	}
	c.mu.Lock()
	serving, to, bb := c.serving, c.to, c.bb
	c.mu.Unlock()
	rg, rs := c.reg.stats(), c.rs.stats()
	m := &MembershipStatus{Serving: serving, Registrar: idString(to), Registry: rg.Roster, Roster: rs.Roster,
		Sent: map[string]uint64{}, Received: map[string]uint64{}}
	for st, v := range rs.Answers {
		m.Sent[st.slug()] += v
	}
	if rs.Failed > 0 {
		m.Sent["failed"] = rs.Failed
	}
	for st, v := range rg.Answered {
		m.Received[st.slug()] += v
	}
	if bb != nil {
		for _, s := range bb.Summaries() {
			if s.Superpeer != n.self {
				m.Backbone++
			}
		}
	}
	return m
}

// Status returns the node's status: its State with the network, strategy,
// election and the peers it knows of. The election's event counts and last
// election are a StatusServer's (it follows the events); here they are
// zero.
func (n *Node) Status() Status { return n.statusOf(n.State(), n.ElectionStats(), true) }

// statusOf is Status from st and es, with the peer list when peers is set.
func (n *Node) statusOf(st State, es ElectionStats, peers bool) Status {
	s := Status{
		ID: n.self.String(), Network: n.cfg.Network, Strategy: n.cfg.Strategy, Role: st.Role, Private: n.Private(),
		Cluster:      ClusterStatus{Prefix: st.Prefix, K: st.K, Key: st.ClusterKey.String(), TargetSuperpeers: st.S},
		Superpeer:    PeerStatus{ID: idString(st.Superpeer.ID), Addrs: addrStrings(st.Superpeer)},
		Members:      make([]string, len(st.Members)),
		SizeEstimate: SizeEstimate{N: st.Size.N, Source: st.Size.Source},
		Coord:        coordOf(st.Coord),
		Evaluations:  st.Evaluations, Lookups: st.Lookups, LookupQueries: st.Queries,
		Time: time.Now(),
	}
	if peers {
		s.Peers = n.peerStatuses(st)
	}
	for i, p := range st.Members {
		s.Members[i] = p.String()
	}
	var refused map[[2]string]uint64
	refused, s.Bans = n.guard.Refused()
	for k, v := range refused {
		if s.Refused == nil {
			s.Refused = map[string]map[string]uint64{}
		}
		if s.Refused[k[0]] == nil {
			s.Refused[k[0]] = map[string]uint64{}
		}
		s.Refused[k[0]][k[1]] = v
	}
	if n.geo != nil {
		tok := st.Token
		s.Token = &tok
		s.Distrusted, s.VetChecks = n.distrustCount()
	}
	if d, src, ok := n.rttToSuperpeer(st); ok {
		s.RTTToSuperpeer = &RTT{MS: float64(d) / float64(time.Millisecond), Source: src}
	}
	s.Membership = n.membershipStatus()
	if es.Algorithm != "" {
		s.Election = &ElectionStatus{
			Algorithm: es.Algorithm, Leader: idString(es.Leader), Role: es.Role, Term: es.Term,
			TimeoutMS: float64(es.Timeout) / float64(time.Millisecond), Lookup: idString(es.Lookup),
			Sent: es.Sent, Dropped: es.Dropped, Throttled: es.Throttled,
		}
	}
	return s
}

// rttToSuperpeer returns the RTT to the node's superpeer and its source
// (see RTT); false for a superpeer, or when nothing is known.
func (n *Node) rttToSuperpeer(st State) (time.Duration, string, bool) {
	sp := st.Superpeer.ID
	if sp == "" || sp == n.self {
		return 0, "", false
	}
	if d := n.host.Peerstore().LatencyEWMA(sp); d > 0 {
		return d, "peerstore", true
	}
	if n.geo != nil && st.Coord != nil {
		if c, ok := n.geo.feeds.coord(sp); ok && st.Coord.IsCompatibleWith(c) {
			return time.Duration(geometric.Distance(st.Coord, c) * float64(time.Second)), "coordinates", true
		}
	}
	return 0, "", false
}

// peerStatuses lists the peers the node knows of: its membership view,
// with its own cluster and superpeer added, and with the geometric
// strategy the token holders and the coordinates heard.
func (n *Node) peerStatuses(st State) []PeerStatus {
	byID := map[peer.ID]*PeerStatus{}
	get := func(p peer.ID) *PeerStatus {
		ps, ok := byID[p]
		if !ok {
			ps = &PeerStatus{ID: p.String(), Self: p == n.self}
			byID[p] = ps
		}
		return ps
	}
	// The DHT strategy: a peer's superpeer is the peer of its cluster that
	// announces itself as one (the one with the smallest key if several
	// do, as the lookup would pick).
	entries := n.members.Entries()
	type cluster struct {
		k   int
		key dhtselect.Key
	}
	claims := map[cluster][]peer.ID{}
	for _, e := range entries {
		if e.Superpeer {
			c := cluster{e.K, e.ClusterKey}
			claims[c] = append(claims[c], e.ID)
		}
	}
	for _, e := range entries {
		ps := get(e.ID)
		ps.Addrs = addrStrings(peer.AddrInfo{ID: e.ID, Addrs: e.Addrs})
		ps.Role = RoleOrdinary
		if e.Superpeer {
			ps.Role = RoleSuperpeer
		}
		if n.geo == nil {
			ps.Cluster = e.ClusterKey.Prefix(e.K)
			if sps := claims[cluster{e.K, e.ClusterKey}]; len(sps) > 0 {
				dhtselect.SortByKey(sps)
				ps.Superpeer = sps[0].String()
			}
		}
	}
	if n.geo != nil {
		for p, c := range n.geo.feeds.coords() {
			get(p).Coord = coordOf(c)
		}
		for _, tp := range n.geo.feeds.tokens() {
			if tp.Superpeer {
				get(tp.Holder).Role = RoleSuperpeer
			}
		}
	}
	// The node's own view of its cluster wins over the announcements.
	self := get(n.self)
	self.Role, self.Coord = st.Role, coordOf(st.Coord)
	if st.Superpeer.ID != "" {
		sp := get(st.Superpeer.ID)
		sp.Role = RoleSuperpeer
		if len(sp.Addrs) == 0 {
			sp.Addrs = addrStrings(st.Superpeer)
		}
		for _, m := range st.Members {
			ps := get(m)
			ps.Cluster, ps.Superpeer = st.Prefix, st.Superpeer.ID.String()
			if m != st.Superpeer.ID && ps.Role == RoleUnknown {
				ps.Role = RoleOrdinary
			}
		}
		sp.Cluster, sp.Superpeer = st.Prefix, st.Superpeer.ID.String()
	}
	ids := make([]peer.ID, 0, len(byID))
	for p := range byID {
		ids = append(ids, p)
	}
	slices.Sort(ids)
	out := make([]PeerStatus, len(ids))
	for i, p := range ids {
		out[i] = *byID[p]
	}
	return out
}

func idString(p peer.ID) string {
	if p == "" {
		return ""
	}
	return p.String()
}

func addrStrings(ai peer.AddrInfo) []string {
	out := make([]string, 0, len(ai.Addrs))
	for _, a := range ai.Addrs {
		out = append(out, a.String())
	}
	return out
}

func coordOf(c *coordinate.Coordinate) *Coord {
	if c == nil {
		return nil
	}
	return &Coord{Vec: slices.Clone(c.Vec), Height: c.Height, Error: c.Error, Adjustment: c.Adjustment}
}

// ErrStatusServer reports that a StatusServer could not start.
var ErrStatusServer = errors.New("overlay: status server")

// StatusServer serves a node's status over HTTP:
//
//   - GET /status: the node's Status in JSON;
//   - GET /metrics: Prometheus metrics in the text format (see
//     NewStatusServer for the list), read from the node at scrape time;
//   - GET /overview: the node's Overview in JSON, with the time line of
//     the changes the server saw (its own role, elections, and the
//     clusters' states and superpeers, noted every ObserveEvery and at
//     each request, whether or not anyone reads the page);
//   - GET /: a self-contained page (overlay/web, no external scripts)
//     that fetches /overview every second and draws every cluster the
//     node knows of, its own in detail, and the time line.
//
// It is an http.Handler: the caller runs it (an http.Server, or under a
// prefix with http.StripPrefix) and decides its lifetime; Close stops it
// following the node's events once the caller is done with it.
type StatusServer struct {
	n   *Node
	mux *http.ServeMux
	sub event.Subscription
	// done is closed when the event loop has stopped.
	done chan struct{}

	mu                sync.Mutex
	elections, losses uint64
	last              *LastElection
	timeline          Timeline
}

var _ http.Handler = (*StatusServer)(nil)

// ObserveEvery is how often a StatusServer notes the clusters in its time
// line (Timeline.Observe), so that a page opened after a failover shows
// it: the node's view of the clusters, which follows its cluster (a
// member's) or the backbone's summaries (a superpeer's), read once a
// second; the time line holds at most MaxTimeline entries.
const ObserveEvery = time.Second

// NewStatusServer returns the HTTP handler of n's status (see
// StatusServer). It subscribes to n's EvtSuperpeerElected and
// EvtSuperpeerLost events, and counts them from then on, and notes the
// clusters in its time line every ObserveEvery (one goroutine, which
// Close stops); everything else it reads from the node when asked.
//
// The metrics, on a registry of the server's own (with the Go and process
// collectors beside them):
//
//	superpeer_info{id,network,strategy,election}     1
//	superpeer_role{role}                             1 for the node's role, 0 for the others
//	superpeer_cluster_members                        members of the node's cluster, itself included
//	superpeer_known_peers                            peers in the membership view (DHT: the registry or the roster), itself included
//	superpeer_registry_members                       registrations held while serving, itself included (DHT)
//	superpeer_roster_members                         the roster held from the registrar, itself not (DHT)
//	superpeer_registrations_sent_total{status}       registrations sent, by the answer's status (DHT)
//	superpeer_registrations_received_total{status}   registrations answered, by status (DHT)
//	superpeer_backbone_summaries                     other superpeers' summaries held from the backbone (DHT)
//	superpeer_network_size_estimate{source}          the network-size estimate
//	superpeer_reserved_bits                          k
//	superpeer_target_superpeers                      S
//	superpeer_evaluations_total                      role evaluations
//	superpeer_lookups_total                          lookups of the cluster key
//	superpeer_lookup_queries_total                   lookup queries sent to other peers
//	superpeer_elections_total                        EvtSuperpeerElected seen (with an election)
//	superpeer_superpeer_losses_total                 EvtSuperpeerLost seen (with an election)
//	superpeer_election_term                          the election's term
//	superpeer_election_detection_timeout_seconds     its failure-detection timeout
//	superpeer_election_messages_sent_total{type}     election messages sent, by type
//	superpeer_election_messages_dropped_total        election messages dropped
//	superpeer_election_messages_throttled_total      election messages over the node's budget for a peer, not sent
//	superpeer_superpeer_rtt_seconds{source}          RTT to the superpeer, when known (see RTT)
//	superpeer_token                                  the token held, or -1 (geometric strategy)
//	superpeer_wire_refused_total{protocol,reason}    messages refused on the stream protocols (wire.go)
//	superpeer_peers_banned_total                     peers banned for bad messages
//	superpeer_coordinates_distrusted_total           claimed coordinates that disagreed with the measured RTT (geometric)
//	superpeer_coordinates_checked_total              claimed coordinates checked: the denominator (geometric)
//	superpeer_gossip_messages_total{topic,decision}  other peers' topic messages by validator decision
//	                                                 (DHT: backbone; geometric: membership, token: the backbone's, token-cluster: the cluster topics')
func NewStatusServer(n *Node) (*StatusServer, error) {
	if n == nil {
		return nil, fmt.Errorf("%w: no node", ErrStatusServer)
	}
	sub, err := n.host.EventBus().Subscribe([]any{new(EvtSuperpeerElected), new(EvtSuperpeerLost), new(EvtRoleChanged)})
	if err != nil {
		return nil, fmt.Errorf("%w: subscribe to the node's events: %w", ErrStatusServer, err)
	}
	s := &StatusServer{n: n, sub: sub, done: make(chan struct{})}
	if es := n.ElectionStats(); es.Leader != "" {
		// Elected before the subscription: no event will tell.
		s.last = &LastElection{Time: time.Now(), Term: es.Term, Leader: es.Leader.String()}
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(&collector{s: s}); err != nil {
		_ = sub.Close()
		return nil, fmt.Errorf("%w: metrics: %w", ErrStatusServer, err)
	}
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /{$}", serveIndex)
	s.mux.HandleFunc("GET /status", s.serveStatus)
	s.mux.HandleFunc("GET /overview", func(w http.ResponseWriter, _ *http.Request) { serveJSON(w, s.Overview()) })
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	go s.follow()
	return s, nil
}

// follow counts the election events, and notes them and the node's role
// changes in the time line, and the clusters every ObserveEvery, until
// Close.
func (s *StatusServer) follow() {
	defer close(s.done)
	tick := time.NewTicker(ObserveEvery)
	defer tick.Stop()
	s.observe()
	for {
		var e any
		select {
		case ev, ok := <-s.sub.Out():
			if !ok {
				return
			}
			e = ev
		case <-tick.C:
			s.observe()
			continue
		}
		now := time.Now()
		s.mu.Lock()
		switch e := e.(type) {
		case EvtSuperpeerElected:
			s.elections++
			s.last = &LastElection{Time: now, Term: e.Term, Leader: idString(e.Superpeer)}
			s.timeline.Add(TimelineEntry{Time: now, Kind: "elected", Peer: idString(e.Superpeer),
				Text: fmt.Sprintf("this node's election named %s (term %d)", Short(idString(e.Superpeer)), e.Term)})
		case EvtSuperpeerLost:
			s.losses++
			s.timeline.Add(TimelineEntry{Time: now, Kind: "lost", Peer: idString(e.Superpeer),
				Text: fmt.Sprintf("this node's election lost %s", Short(idString(e.Superpeer)))})
		case EvtRoleChanged:
			s.timeline.Add(TimelineEntry{Time: now, Kind: "role", Peer: s.n.self.String(), From: e.Old.String(), To: e.New.String(),
				Text: fmt.Sprintf("this node: %s → %s", e.Old, e.New)})
		}
		s.mu.Unlock()
	}
}

// observe notes in the time line how the clusters changed since it last
// looked (by ID, as Overview sorts them).
func (s *StatusServer) observe() {
	cs := s.n.overview().Clusters
	slices.SortFunc(cs, func(a, b ClusterView) int { return cmp.Compare(a.ID, b.ID) })
	s.timeline.Observe(time.Now(), cs)
}

// Overview returns the node's Overview (Node.Overview) with the server's
// time line, after noting in it how the clusters changed since the last
// request.
func (s *StatusServer) Overview() Overview {
	o := s.n.Overview()
	s.addElections(o.Node)
	s.timeline.Observe(o.Time, o.Clusters)
	o.Timeline = s.timeline.Entries(o.Time)
	return o
}

// Close stops following the node's events. It does not stop serving: the
// caller's http.Server does that. Safe to call more than once.
func (s *StatusServer) Close() error {
	err := s.sub.Close()
	<-s.done
	return err
}

// ServeHTTP serves /status, /overview, /metrics and the page on /.
func (s *StatusServer) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Status returns the node's Status with the election events this server
// has seen.
func (s *StatusServer) Status() Status {
	st := s.n.Status()
	s.addElections(&st)
	return st
}

// addElections fills in the election events the server has seen.
func (s *StatusServer) addElections(st *Status) {
	if st.Election == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st.Election.Elections, st.Election.Losses = s.elections, s.losses
	if s.last != nil {
		l := *s.last
		st.Election.Last = &l
	}
}

func (s *StatusServer) serveStatus(w http.ResponseWriter, _ *http.Request) { serveJSON(w, s.Status()) }

// collector reads the node's metrics at scrape time.
type collector struct{ s *StatusServer }

func metricDesc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc("superpeer_"+name, help, labels, nil)
}

var (
	descInfo        = metricDesc("info", "The node: its peer ID, overlay network, selection strategy and election algorithm; always 1.", "id", "network", "strategy", "election")
	descRole        = metricDesc("role", "1 for the node's current role (unknown, ordinary or superpeer), 0 for the others.", "role")
	descMembers     = metricDesc("cluster_members", "Members of the node's cluster that it knows of, itself included.")
	descKnown       = metricDesc("known_peers", "Peers in the node's membership view, itself included (DHT strategy: the registry while it serves, else the roster from its registrar).")
	descRegistry    = metricDesc("registry_members", "Registrations the node holds while it serves its cluster, itself included; 0 otherwise (DHT strategy).")
	descRoster      = metricDesc("roster_members", "Peers in the roster the node holds from its registrar, itself not included (DHT strategy).")
	descRegSent     = metricDesc("registrations_sent_total", "Registrations the node sent, by the answer's status (unchanged, delta, snapshot: accepted; not_superpeer, wrong_cluster, full, too_soon, bad_record, crowded, not_a_member: refused; need_record; failed: no answer) (DHT strategy).", "status")
	descRegRecv     = metricDesc("registrations_received_total", "Registrations the node answered, by status (as registrations_sent_total) (DHT strategy).", "status")
	descBackbone    = metricDesc("backbone_summaries", "Other superpeers' cluster summaries the node holds from the backbone, while it serves (DHT strategy).")
	descSize        = metricDesc("network_size_estimate", "The network-size estimate the superpeer target is computed from, by the source used.", "source")
	descK           = metricDesc("reserved_bits", "k, the leading bits of the key space reserved for clusters (0 with the geometric strategy).")
	descS           = metricDesc("target_superpeers", "S, the number of superpeers aimed at.")
	descEvaluations = metricDesc("evaluations_total", "Role evaluations completed.")
	descLookups     = metricDesc("lookups_total", "Lookups of the cluster key.")
	descQueries     = metricDesc("lookup_queries_total", "Lookup queries sent to other peers.")
	descElections   = metricDesc("elections_total", "Leaders named by the node's cluster election (EvtSuperpeerElected) since the status server started.")
	descLosses      = metricDesc("superpeer_losses_total", "Leaders the node's cluster election stopped naming (EvtSuperpeerLost: it died, or an election started) since the status server started.")
	descTerm        = metricDesc("election_term", "The cluster election's current term (0 unless the algorithm or quorum counts terms).")
	descTimeout     = metricDesc("election_detection_timeout_seconds", "The cluster election's current failure-detection timeout.")
	descSent        = metricDesc("election_messages_sent_total", "Election messages sent, by type.", "type")
	descDropped     = metricDesc("election_messages_dropped_total", "Election messages received from non-members or malformed.")
	descThrottled   = metricDesc("election_messages_throttled_total", "Election messages not sent: over the node's budget for their peer.")
	descRTT         = metricDesc("superpeer_rtt_seconds", "RTT to the node's superpeer when known: measured (source peerstore, the host's moving average) or predicted by the network coordinates (source coordinates).", "source")
	descToken       = metricDesc("token", "The number of the token the node holds, or -1 (geometric strategy).")
	descRefused     = metricDesc("wire_refused_total", "Messages refused on the overlay's stream protocols, by protocol and reason (size, version, type, truncated, malformed, timeout, rate, limit, banned; io: the stream failed, a reset or a closed connection).", "protocol", "reason")
	descBans        = metricDesc("peers_banned_total", "Peers banned for sending bad messages.")
	descDistrusted  = metricDesc("coordinates_distrusted_total", "Claimed coordinates that disagreed with the RTT measured to the peer, so no token went to it (geometric strategy).")
	descChecked     = metricDesc("coordinates_checked_total", "Claimed coordinates checked against the RTTs measured to the peer before a token pass: the denominator of coordinates_distrusted_total (geometric strategy).")
	descGossip      = metricDesc("gossip_messages_total", "Other peers' messages on the overlay's topics (DHT strategy: backbone; geometric: membership, token: the token reports' backbone, token-cluster: the cluster token topics), by topic and the validator's decision (accepted; rejected: malformed or forged; ignored: stale, or from a banned peer; crowded: ignored for want of room, a cluster's summaries or a token's reports being full).", "topic", "decision")
)

// Describe sends every descriptor the collector may use.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInfo, descRole, descMembers, descKnown, descSize, descK, descS,
		descEvaluations, descLookups, descQueries, descElections, descLosses, descTerm, descTimeout,
		descSent, descDropped, descThrottled, descRTT, descToken, descRefused, descBans, descDistrusted, descChecked, descGossip,
		descRegistry, descRoster, descRegSent, descRegRecv, descBackbone} {
		ch <- d
	}
}

// Collect reads the node's state and sends the metrics.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	n := c.s.n
	st := n.State()
	es := n.ElectionStats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge(descInfo, 1, n.self.String(), n.cfg.Network, n.cfg.Strategy, es.Algorithm)
	for _, r := range []Role{RoleUnknown, RoleOrdinary, RoleSuperpeer} {
		v := 0.0
		if st.Role == r {
			v = 1
		}
		gauge(descRole, v, r.String())
	}
	gauge(descMembers, float64(len(st.Members)))
	gauge(descKnown, float64(n.members.Len()))
	gauge(descSize, float64(st.Size.N), st.Size.Source)
	gauge(descK, float64(st.K))
	gauge(descS, float64(st.S))
	counter(descEvaluations, st.Evaluations)
	counter(descLookups, st.Lookups)
	counter(descQueries, st.Queries)
	if es.Algorithm != "" {
		c.s.mu.Lock()
		elections, losses := c.s.elections, c.s.losses
		c.s.mu.Unlock()
		counter(descElections, elections)
		counter(descLosses, losses)
		gauge(descTerm, float64(es.Term))
		gauge(descTimeout, es.Timeout.Seconds())
		for t, v := range es.Sent {
			counter(descSent, v, t)
		}
		counter(descDropped, es.Dropped)
		counter(descThrottled, es.Throttled)
	}
	if d, src, ok := n.rttToSuperpeer(st); ok {
		gauge(descRTT, d.Seconds(), src)
	}
	if n.geo != nil {
		gauge(descToken, float64(st.Token))
		distrusted, checked := n.distrustCount()
		counter(descDistrusted, distrusted)
		counter(descChecked, checked)
	}
	refused, bans := n.guard.Refused()
	for k, v := range refused {
		counter(descRefused, v, k[0], k[1])
	}
	counter(descBans, bans)
	// The membership's topic: the backbone (DHT strategy: every backbone
	// the node was on, clusterMembership.Stats), or the global membership
	// topic (geometric).
	feeds := map[string]gossip.FeedStats{}
	if m := n.membershipStatus(); m != nil {
		feeds["backbone"] = n.members.Stats()
		gauge(descRegistry, float64(m.Registry))
		gauge(descRoster, float64(m.Roster))
		gauge(descBackbone, float64(m.Backbone))
		for st, v := range m.Sent {
			counter(descRegSent, v, st)
		}
		for st, v := range m.Received {
			counter(descRegRecv, v, st)
		}
	} else {
		feeds["membership"] = n.members.Stats()
	}
	if n.geo != nil {
		feeds["token"], feeds["token-cluster"] = n.geo.feeds.stats()
	}
	for topic, fs := range feeds {
		counter(descGossip, fs.Accepted, topic, "accepted")
		counter(descGossip, fs.Rejected, topic, "rejected")
		counter(descGossip, fs.Ignored-fs.Crowded, topic, "ignored")
		counter(descGossip, fs.Crowded, topic, "crowded")
	}
}

// distrustCount is how many claims the geometric strategy's liar check
// found implausible, and how many it checked.
func (n *Node) distrustCount() (distrusted, checked uint64) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.distrusted, n.vetChecks
}
