package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/superpeer/superpeer/classic"
)

// TestSkipDecidesAsTicks: a machine ticked only at its NextTick, with the
// ticks in between made up by Skip before each input and tick, sends the
// same messages and takes the same states at the same times as its twin
// ticked every ElectionTick: with bully and ring (classic.Idlers) and
// candidate (ticked every tick), through a leader's heartbeats that stop
// (a failover: the node campaigns and leads, then beats itself), and its
// return; and it dials its bootstrap peer at the same times (Links, while
// it leads and its bootstrap peer is not connected). And it needs far
// fewer ticks with the first two.
func TestSkipDecidesAsTicks(t *testing.T) {
	for _, c := range []struct {
		election string
		most     float64 // ticks when due at most, as a fraction of every tick
	}{{"bully", 0.5}, {"ring", 0.5}, {"candidate", 1}} {
		t.Run(c.election, func(t *testing.T) {
			every, n := skipTwin(t, c.election, false)
			due, m := skipTwin(t, c.election, true)
			if len(every) < 10 {
				t.Fatalf("only %d outputs: the scenario did nothing", len(every))
			}
			for k := range max(len(every), len(due)) {
				var a, b string
				if k < len(every) {
					a = every[k]
				}
				if k < len(due) {
					b = due[k]
				}
				if a != b {
					t.Fatalf("output %d: ticked every tick %q, when due %q", k, a, b)
				}
			}
			if float64(m) > c.most*float64(n) {
				t.Errorf("%d ticks when due, %d every tick", m, n)
			}
			t.Logf("%d outputs; %d ticks when due, %d every tick", len(every), m, n)
		})
	}
}

// skipTwin runs node b of the cluster {a, b, c} for 60 s: a sends a
// heartbeat every 500 ms for 20 s and from 40 s on; the lookup names a.
// It returns every output (time, messages, state changes) and the ticks
// made (Tick calls).
func skipTwin(t *testing.T, election string, whenDue bool) ([]string, int) {
	t.Helper()
	cfg := testConfig("b")
	cfg.Election, cfg.Bootstrap = election, true
	m := mustNew(t, cfg)
	const p = 100 * time.Millisecond
	var out []string
	ticks := 0
	var record func(at time.Time)
	record = func(at time.Time) {
		rd := m.Ready()
		for _, l := range rd.Lookups {
			m.Step(at, LookupDone{Key: l.Key, Superpeer: "a", Queries: 1})
			out = append(out, fmt.Sprintf("%v lookup", at.Sub(t0)))
		}
		if len(rd.Messages) > 0 || rd.StateChanged || rd.Dial || rd.Refresh != RefreshNone {
			out = append(out, fmt.Sprintf("%v %v %v %s %s %v %v", at.Sub(t0), rd.Messages, rd.StateChanged, rd.State.Role, rd.State.Superpeer, rd.Dial, rd.Refresh))
		}
		if rd.Dial {
			m.Step(at, Dialled{Reached: 1})
			record(at)
		}
		if len(rd.Lookups) > 0 {
			record(at)
		}
	}
	members := View{Members: []Member{{ID: "a"}, {ID: "b"}, {ID: "c"}}}
	m.Step(t0, members)
	record(t0)
	grid := t0.Add(30 * time.Millisecond) // the next tick not yet made or skipped
	catchUp := func(now time.Time) {      // the ticks before now
		if whenDue && grid.Before(now) {
			k := int((now.Sub(grid) + p - 1) / p)
			m.Skip(k, grid.Add(time.Duration(k-1)*p))
			grid = grid.Add(time.Duration(k) * p)
		}
	}
	beat := t0.Add(250 * time.Millisecond)
	end := t0.Add(60 * time.Second)
	for {
		at := grid // the next tick
		if next := m.NextTick(); whenDue && next.After(grid) {
			at = grid.Add((next.Sub(grid) + p - 1) / p * p)
		}
		if beat.Before(at) {
			catchUp(beat)
			if s := beat.Sub(t0); s < 20*time.Second || s > 40*time.Second {
				m.Step(beat, ElectionMessage{Msg: classic.Message{Type: classic.MsgHeartbeat, From: "a", To: "b", Leader: "a"}})
				record(beat)
			}
			beat = beat.Add(500 * time.Millisecond)
			continue
		}
		if !at.Before(end) {
			break
		}
		catchUp(at)
		grid = at.Add(p)
		if m.Due(at) {
			m.Step(at, routing(2))
		}
		if sp, ok := m.LinksDue(at); ok {
			// Connected to its bootstrap peer while a heartbeats.
			s := at.Sub(t0)
			m.Step(at, Links{Table: 2, Connected: 2, Bootstrap: s < 20*time.Second || s > 40*time.Second, Superpeer: sp != ""})
		}
		m.Tick(at)
		ticks++
		record(at)
	}
	return out, ticks
}
