package nodesim

import (
	"fmt"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/superpeer/superpeer/classic"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/superpeer/superpeer/dhtselect"
	"github.com/superpeer/superpeer/overlay/node"
)

func TestDbgFlap(t *testing.T) {
	s := converged(t, Config{N: 64, Seed: 0, Stagger: 5 * time.Second,
		Node: node.Config{Target: dhtselect.Target{Fraction: 0.125}, Election: "bully"}})
	s.RunFor(10 * time.Second)
	x := -1
	for i := range s.N() {
		if st := s.State(i); st.Role == node.RoleSuperpeer && (x < 0 || len(st.Members) > len(s.State(x).Members)) {
			x = i
		}
	}
	mates := []int{}
	for i := range s.N() {
		if i != x && s.State(i).Superpeer == s.ID(x) {
			mates = append(mates, i)
		}
	}
	show := func(tag string) {
		st := s.State(x)
		m := mates[0]
		inView := slices.Contains(s.State(m).Members, s.ID(x))
		el := s.Machine(m).Election()
		t.Logf("%s t=%v x role=%v members=%d flapping=%v | named=%q | m%d sp=%s xInView=%v demoted=%v leader=%s lookup=%s", tag, s.Now(), st.Role, len(st.Members), s.Machine(x).Election().Demoted, named(s, mates), m, s.State(m).Superpeer, inView, el.Demoted, el.Leader, el.Lookup)
	}
	for f := range 6 {
		s.Isolate(x)
		for range 5 {
			s.RunFor(time.Second)
			show(fmt.Sprintf("iso%d", f))
		}
		s.Heal()
		for range 5 {
			s.RunFor(time.Second)
			show(fmt.Sprintf("heal%d", f))
		}
	}
}

func TestDbgHostile(t *testing.T) {
	algo := "ring-max"
	s := converged(t, Config{N: 24, Seed: 0, Stagger: 5 * time.Second,
		Node: node.Config{Target: dhtselect.Target{Superpeers: 3}, Election: algo}})
	s.RunFor(10 * time.Second)
	lead, members := rankedCluster(t, s, 4, 0)
	a, _ := s.Index(members[2])
	heir, _ := s.Index(members[1])
	var victims []int
	for _, id := range members[3:] {
		v, _ := s.Index(id)
		victims = append(victims, v)
	}
	attacker := s.ID(a)
	seq := uint64(0)
	s.Every(200*time.Millisecond, func(s *Sim) {
		seq++
		for _, v := range victims {
			s.Inject(a, v, classic.Message{Type: classic.MsgCoordinator, Leader: classic.ID(attacker), IDs: []classic.ID{classic.ID(attacker)},
				Election: classic.ElectionID{Source: classic.ID(attacker), Seq: seq}, Term: seq})
			s.Inject(a, v, classic.Message{Type: classic.MsgHeartbeat, Leader: classic.ID(attacker), Term: seq})
		}
	})
	s.RunFor(30 * time.Second)
	s.Crash(lead)
	node.SetDbgCarry(func(self peer.ID, c int, o, nw classic.ID) {
		if self == s.ID(22) {
			t.Logf("t=%v carry %d %s -> %s", s.Now(), c, o, nw)
		}
	})
	defer node.SetDbgCarry(nil)
	t.Logf("lead %d heir %d attacker %d victims %v", lead, heir, a, victims)
	s.Every(100*time.Millisecond, func(s *Sim) {
		for _, v := range victims {
			st := s.State(v)
			if st.Superpeer == attacker {
				t.Logf("t=%v victim %d follows attacker; members %d; election %+v", s.Now(), v, len(st.Members), s.Machine(v).Election())
			}
		}
	})
	for range 30 {
		s.RunFor(time.Second)
		line := fmt.Sprintf("t=%v heir role=%v members=%d |", s.Now(), s.State(heir).Role, len(s.State(heir).Members))
		for _, v := range victims {
			line += fmt.Sprintf(" v%d sp=%d m=%d", v, func() int { j, _ := s.Index(s.State(v).Superpeer); return j }(), len(s.State(v).Members))
		}
		t.Log(line)
		t.Logf("v22 election %+v", s.Machine(22).Election())
	}
}

func TestDbgQuorum(t *testing.T) {
	s, err := New(Config{N: 16, Seed: 0, Stagger: 5 * time.Second,
		Node: node.Config{Target: dhtselect.Target{Fraction: 0.25}, Election: "bully", Quorum: true}})
	if err != nil {
		t.Fatal(err)
	}
	for range 12 {
		s.RunFor(5 * time.Second)
		t.Logf("t=%v %+v", s.Now(), s.Take())
	}
	for i := range s.N() {
		st := s.State(i)
		sp, _ := s.Index(st.Superpeer)
		t.Logf("size=%+v n%d role=%v k=%d ck=%s sp=%d members=%d reg=%q serves=%v el=%+v", st.Size, i, st.Role, st.K, st.Prefix, sp, len(st.Members), s.Machine(i).Registrar(), s.Machine(i).Serves(), s.Machine(i).Election())
	}
}

func TestDbgQuorum2(t *testing.T) {
	s, err := New(Config{N: 16, Seed: 0, Stagger: 5 * time.Second,
		Node: node.Config{Target: dhtselect.Target{Fraction: 0.25}, Election: "bully", Quorum: true}})
	if err != nil {
		t.Fatal(err)
	}
	s.RunFor(50 * time.Second)
	dbgAnswered = func(i int, e event) {
		if i == 10 {
			t.Logf("t=%v n10 answer from %d: %+v roster %v; registrar %s", s.Now(), e.other, e.digest, e.ids, s.Machine(10).Registrar())
		}
	}
	defer func() { dbgAnswered = nil }()
	s.Watch = func(at time.Duration, i int, rd node.Ready) {
		if i == 10 && rd.StateChanged {
			t.Logf("t=%v n10 state k=%d size=%+v sp=%s evals=%d", at, rd.State.K, rd.State.Size, rd.State.Superpeer, rd.State.Evaluations)
		}
		if i == 10 && len(rd.Lookups) > 0 {
			t.Logf("t=%v n10 lookups %+v", at, rd.Lookups)
		}
	}
	s.RunFor(10 * time.Second)
}

func TestDbgGrind(t *testing.T) {
	cfg := Config{N: 16, Seed: 4, Stagger: 5 * time.Second,
		Node: node.Config{Target: dhtselect.Target{Superpeers: 2}, Election: "bully"}}
	cfg.Node.Epoch = node.EpochConfig{Length: grindEpoch, Chain: 4096}
	copy(cfg.Node.Epoch.Secret[:], fmt.Sprint(4))
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.RunFor(40 * time.Second)
	shown := 0
	for range 600 {
		s.RunFor(time.Second)
		named := map[dhtselect.Key]map[peer.ID]bool{}
		for i := range s.N() {
			x := s.State(i)
			if named[x.ClusterKey] == nil {
				named[x.ClusterKey] = map[peer.ID]bool{}
			}
			named[x.ClusterKey][x.Superpeer] = true
		}
		bad := false
		for _, sps := range named {
			bad = bad || len(sps) > 1 || sps[""]
		}
		if !bad || shown > 6 {
			continue
		}
		shown++
		t.Logf("t=%v %+v", s.Now(), s.Take())
		for i := range s.N() {
			st := s.State(i)
			sp, _ := s.Index(st.Superpeer)
			if st.Superpeer == "" {
				sp = -1
			}
			t.Logf("  n%d role=%v k=%d ck=%s sp=%d members=%d reg=%q size=%+v lookup=%s leader=%s", i, st.Role, st.K, st.Prefix, sp, len(st.Members), s.Machine(i).Registrar(), st.Size, s.Machine(i).Election().Lookup, s.Machine(i).Election().Leader)
		}
	}
}

func TestDbgAgree(t *testing.T) {
	s := converged(t, Config{N: 64, Seed: 1, Stagger: 5 * time.Second,
		Node: node.Config{Target: dhtselect.Target{Fraction: 0.125}, Election: "bully"}})
	s.RunFor(10 * time.Second)
	x := -1
	for i := range s.N() {
		if st := s.State(i); st.Role == node.RoleSuperpeer && (x < 0 || len(st.Members) > len(s.State(x).Members)) {
			x = i
		}
	}
	since := map[int]time.Duration{}
	var log []string
	s.Every(50*time.Millisecond, func(s *Sim) {
		for i := range s.N() {
			e := s.Machine(i).Election()
			lj, _ := s.Index(e.Lookup)
			d := s.Alive(i) && e.Lookup != "" && e.Leader != "" && s.State(lj).Role != node.RoleUnknown && e.Lookup != e.Leader && !slices.Contains(e.Demoted, e.Lookup) && !s.ranksItselfLast(e.Lookup)
			if d {
				if _, ok := since[i]; !ok {
					since[i] = s.Now()
				}
				if s.Now()-since[i] > 1800*time.Millisecond && len(log) < 400 && int(s.Now()/time.Millisecond)%250 == 0 {
					xe := s.Machine(lj).Election()
					log = append(log, fmt.Sprintf("t=%v [k=%d ck=%s | lookup k=%d ck=%s lookupsLookup=%s lookupMembers=%d] n%d role=%v reg=%s (since %v) leader=%s lookup=%s(n%d) members=%d lookupInView=%v | lookup node: role=%v leader=%s el=%+v", s.Now(), s.State(i).K, s.State(i).Prefix, s.State(lj).K, s.State(lj).Prefix, s.Machine(lj).Election().Lookup, len(s.State(lj).Members), i, s.State(i).Role, s.Machine(i).Registrar(), since[i], e.Leader, e.Lookup, lj, len(s.State(i).Members), slices.Contains(s.State(i).Members, e.Lookup), s.State(lj).Role, xe.Leader, xe))
				}
			} else {
				delete(since, i)
			}
		}
	})
	t.Logf("x = n%d", x)
	for range 2 {
		s.Isolate(x)
		s.RunFor(3 * time.Second)
		s.Heal()
		s.RunFor(5 * time.Second)
	}
	s.RunFor(90 * time.Second)
	for _, l := range log {
		t.Log(l)
	}
}

func TestDbgSybil(t *testing.T) {
	const honest = 24
	s, err := New(Config{N: honest + 40, Seed: 0, Stagger: 5 * time.Second,
		Addr: func(i int) string {
			if i >= honest {
				return "10.6.6.6"
			}
			return fmt.Sprintf("10.0.0.%d", i)
		},
		Node: node.Config{Target: dhtselect.Target{Fraction: 0.25}, Election: "bully", Quorum: true, MaxPerAddr: node.DefaultMaxPerAddr}})
	if err != nil {
		t.Fatal(err)
	}
	s.RunFor(60 * time.Second)
	for i := range honest {
		st := s.State(i)
		sp, ok := s.Index(st.Superpeer)
		if !ok {
			sp = -1
		}
		t.Logf("  n%d role=%v k=%d ck=%s sp=%d members=%d reg=%q size=%+v lookup=%s el=%+v", i, st.Role, st.K, st.Prefix, sp, len(st.Members), s.Machine(i).Registrar(), st.Size, s.Machine(i).Election().Lookup, s.Machine(i).Election())
	}
}

func TestDbgFlapTrace(t *testing.T) {
	s := converged(t, Config{N: 64, Seed: 1, Stagger: 5 * time.Second,
		Node: node.Config{Target: dhtselect.Target{Fraction: 0.125}, Election: "bully"}})
	s.RunFor(10 * time.Second)
	x := -1
	for i := range s.N() {
		if st := s.State(i); st.Role == node.RoleSuperpeer && (x < 0 || len(st.Members) > len(s.State(x).Members)) {
			x = i
		}
	}
	s.Isolate(x)
	s.RunFor(3 * time.Second)
	s.Heal()
	t.Logf("healed at %v", s.Now())
	for range 40 {
		st := s.State(x)
		e := s.Machine(x).Election()
		t.Logf("t=%v n%d role=%v k=%d ck=%s size=%+v members=%d leader=%s lookup=%s", s.Now(), x, st.Role, st.K, st.Prefix, st.Size, len(st.Members), e.Leader, e.Lookup)
		s.RunFor(100 * time.Millisecond)
	}
}

func TestDbgChurnAgree(t *testing.T) {
	s := converged(t, Config{N: 64, Seed: 1, Stagger: 5 * time.Second,
		Node: node.Config{Target: dhtselect.Target{Fraction: 0.125}, Election: "bully"}})
	since := map[int]time.Duration{}
	var log []string
	s.Every(50*time.Millisecond, func(s *Sim) {
		for i := range s.N() {
			e := s.Machine(i).Election()
			lj, _ := s.Index(e.Lookup)
			d := s.Alive(i) && e.Lookup != "" && e.Leader != "" && s.State(lj).Role != node.RoleUnknown && e.Lookup != e.Leader && !slices.Contains(e.Demoted, e.Lookup) && !s.ranksItselfLast(e.Lookup)
			if d {
				if _, ok := since[i]; !ok {
					since[i] = s.Now()
				}
				if s.Now()-since[i] > 1800*time.Millisecond && len(log) < 400 {
					li, _ := s.Index(e.Leader)
					log = append(log, fmt.Sprintf("t=%v since %v n%d [role=%v k=%d ck=%s members=%d reg=%s] leader n%d [alive=%v role=%v k=%d ck=%s] lookup n%d [role=%v k=%d ck=%s leader=%s members=%d]",
						s.Now(), since[i], i, s.State(i).Role, s.State(i).K, s.State(i).Prefix, len(s.State(i).Members), s.Machine(i).Registrar(),
						li, s.Alive(li), s.State(li).Role, s.State(li).K, s.State(li).Prefix,
						lj, s.State(lj).Role, s.State(lj).K, s.State(lj).Prefix, s.Machine(lj).Election().Leader, len(s.State(lj).Members)))
				}
			} else {
				delete(since, i)
			}
		}
	})
	crashAndRestart(s, 6*time.Second, 2)
	s.RunFor(3 * time.Minute)
	for _, l := range log {
		t.Log(l)
	}
}

func TestDbgJoiner(t *testing.T) {
	s := converged(t, Config{N: 32, Seed: 1, Stagger: 5 * time.Second,
		Node: node.Config{Target: dhtselect.Target{Fraction: 0.125}}})
	s.Record = true
	j := s.Add()
	for range 30 {
		s.RunFor(200 * time.Millisecond)
		var b strings.Builder
		for i := range s.N() {
			if st := s.State(i); st.Role == node.RoleSuperpeer || i == j {
				fmt.Fprintf(&b, " n%d[%v k=%d ck=%s N=%d/%s m=%d reg=%s]", i, st.Role, st.K, st.Prefix, st.Size.N, st.Size.Source, len(st.Members), s.Machine(i).Registrar())
			}
		}
		t.Logf("t=%v%s", s.Now(), b.String())
	}
}

func TestDbgConv(t *testing.T) {
	s, _ := New(Config{N: 64, Seed: 0, Stagger: 5 * time.Second, Node: node.Config{Target: dhtselect.Target{Fraction: 0.125}}})
	s.RunFor(60 * time.Second)
	c := map[string]int{}
	for i := range s.N() {
		st := s.State(i)
		c[fmt.Sprintf("%v k=%d %d/%s", st.Role, st.K, st.Size.N, st.Size.Source)]++
	}
	t.Log(c)
}

func TestDbgReg(t *testing.T) {
	s := converged(t, Config{N: 32, Seed: 1, Stagger: 5 * time.Second,
		Node: node.Config{Target: dhtselect.Target{Fraction: 0.125}}})
	for range 5 {
		var b strings.Builder
		for i := range s.N() {
			st := s.State(i)
			if st.Role != node.RoleOrdinary {
				fmt.Fprintf(&b, " n%d:%v/k%d/m%d/N%d%s", i, st.Role, st.K, len(st.Members), st.Size.N, st.Size.Source)
				continue
			}
			r, _ := s.Index(s.Machine(i).Registrar())
			sp, _ := s.Index(st.Superpeer)
			_, in := s.nodes[sp].sc.registry[i]
			fmt.Fprintf(&b, " n%d->%d(sp%d,in=%v,k%d)", i, r, sp, in, st.K)
		}
		t.Logf("t=%v%s", s.Now(), b.String())
		s.RunFor(time.Second)
	}
}

func TestDbgFlapMember(t *testing.T) {
	s := converged(t, Config{N: 64, Seed: 1, Stagger: 5 * time.Second,
		Node: node.Config{Target: dhtselect.Target{Fraction: 0.125}, Election: "bully"}})
	s.RunFor(10 * time.Second)
	x := -1
	for i := range s.N() {
		if st := s.State(i); st.Role == node.RoleSuperpeer && (x < 0 || len(st.Members) > len(s.State(x).Members)) {
			x = i
		}
	}
	y := 54
	dbgLookup = func(i, to int, dn bool, d time.Duration) {
		if i == y {
			t.Logf("   t=%v lookup n%d -> n%d deadNear=%v delay=%v", s.Now(), i, to, dn, d)
		}
	}
	defer func() { dbgLookup = nil }()
	s.Isolate(x)
	t.Logf("isolated n%d at %v", x, s.Now())
	for range 60 {
		st := s.State(y)
		e := s.Machine(y).Election()
		t.Logf("t=%v n%d role=%v k=%d sp=%s reg=%s members=%d el=%+v", s.Now(), y, st.Role, st.K, st.Superpeer, s.Machine(y).Registrar(), len(st.Members), e)
		s.RunFor(100 * time.Millisecond)
		if s.Now() == 26*time.Second {
			s.Heal()
		}
	}
}

func TestDbgRingMax(t *testing.T) {
	s := converged(t, Config{N: 24, Seed: 0, Stagger: 5 * time.Second,
		Node: node.Config{Target: dhtselect.Target{Superpeers: 3}, Election: "ring-max"}})
	s.RunFor(10 * time.Second)
	lead, members := rankedCluster(t, s, 4, 0)
	a, _ := s.Index(members[2])
	heir, _ := s.Index(members[1])
	var victims []int
	for _, id := range members[3:] {
		v, _ := s.Index(id)
		victims = append(victims, v)
	}
	attacker := s.ID(a)
	seq := uint64(0)
	s.Every(200*time.Millisecond, func(s *Sim) {
		if !s.Alive(a) {
			return
		}
		seq++
		for _, v := range victims {
			s.Inject(a, v, classic.Message{Type: classic.MsgCoordinator, Leader: classic.ID(attacker), IDs: []classic.ID{classic.ID(attacker)},
				Election: classic.ElectionID{Source: classic.ID(attacker), Seq: seq}, Term: seq})
			s.Inject(a, v, classic.Message{Type: classic.MsgHeartbeat, Leader: classic.ID(attacker), Term: seq})
		}
	})
	s.RunFor(30 * time.Second)
	dbgMsg = func(to int, m classic.Message) {
		if s.Now() > 57000*time.Millisecond && s.Now() < 60000*time.Millisecond && (to == 22) {
			f, _ := s.Index(peer.ID(m.From))
			t.Logf("  t=%v msg n%d -> n%d %v leader=%s ids=%v", s.Now(), f, to, m.Type, m.Leader, m.IDs)
		}
	}
	defer func() { dbgMsg = nil }()
	dbgSend = func(from, to int, m classic.Message) {
		if from == heir && s.Now() > 57000*time.Millisecond && s.Now() < 60000*time.Millisecond {
			t.Logf("  t=%v SEND n%d -> n%d %v", s.Now(), from, to, m.Type)
		}
	}
	defer func() { dbgSend = nil }()
	s.Crash(lead)
	t.Logf("crash n%d at %v; heir n%d attacker n%d victims %v", lead, s.Now(), heir, a, victims)
	for range 300 {
		s.RunFor(100 * time.Millisecond)
		if s.Now() > 56900*time.Millisecond && s.Now() < 60300*time.Millisecond {
			_ = s.State(22)
			reg, _ := s.Index(s.Machine(22).Registrar())
			_, inReg := s.nodes[heir].sc.registry[22]
			t.Logf("t=%v n22 leader=%s reg=n%d inHeirRegistry=%v heirMembers=%d heirServes=%v", s.Now(), s.Machine(22).Election().Leader, reg, inReg, len(s.State(heir).Members), s.Machine(heir).Serves())
			h := s.State(heir)
			t.Logf("t=%v heir role=%v k=%d members=%d el=%+v", s.Now(), h.Role, h.K, len(h.Members), s.Machine(heir).Election())
		}
		for _, v := range victims {
			if s.State(v).Superpeer == attacker {
				st := s.State(v)
				t.Logf("t=%v victim n%d follows attacker: role=%v members=%d reg=%s el=%+v | heir role=%v members=%d el=%+v", s.Now(), v, st.Role, len(st.Members), s.Machine(v).Registrar(), s.Machine(v).Election(), s.State(heir).Role, len(s.State(heir).Members), s.Machine(heir).Election())
			}
		}
	}
}

func TestDbgSybilNone(t *testing.T) {
	const honest = 24
	s, err := New(Config{N: honest + 40, Seed: 0, Stagger: 5 * time.Second,
		Addr: func(i int) string {
			if i >= honest {
				return "10.6.6.6"
			}
			return fmt.Sprintf("10.0.0.%d", i)
		},
		Node: node.Config{Target: dhtselect.Target{Fraction: 0.25}, Election: "bully", Quorum: true, MaxPerAddr: node.DefaultMaxPerAddr}})
	if err != nil {
		t.Fatal(err)
	}
	seq := uint64(0)
	s.Every(200*time.Millisecond, func(s *Sim) {
		seq++
		for a := honest; a < honest+10; a++ {
			me := classic.ID(s.ID(a))
			for v := range honest {
				s.Inject(a, v, classic.Message{Type: classic.MsgCoordinator, Leader: me, IDs: []classic.ID{me},
					Election: classic.ElectionID{Source: me, Seq: seq}, Term: seq})
				s.Inject(a, v, classic.Message{Type: classic.MsgHeartbeat, Leader: me, Term: seq})
				s.Inject(a, v, classic.Message{Type: classic.MsgClaimAck, Term: math.MaxUint64 / 2})
				s.Inject(a, v, classic.Message{Type: classic.MsgClaim, Term: seq * 1e9, Election: classic.ElectionID{Source: me, Seq: seq}})
			}
		}
	})
	s.RunFor(30 * time.Second)
	last := map[int]string{}
	for range 600 {
		s.RunFor(100 * time.Millisecond)
		for i := range honest {
			st := s.State(i)
			line := ""
			if st.Superpeer == "" {
				e := s.Machine(i).Election()
				lk, _ := s.Index(e.Lookup)
				reg, _ := s.Index(s.Machine(i).Registrar())
				line = fmt.Sprintf("n%d NONE role=%v k=%d ck=%s N=%d/%s members=%d reg=n%d lookup=n%d el.role=%v term=%d leader=%s", i, st.Role, st.K, st.Prefix, st.Size.N, st.Size.Source, len(st.Members), reg, lk, e.Role, e.Term, e.Leader)
			}
			if line != last[i] {
				t.Logf("t=%v %s", s.Now(), line)
				last[i] = line
			}
		}
	}
}
