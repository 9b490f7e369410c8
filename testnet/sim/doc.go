// Package sim is a deterministic discrete-event simulator for the election
// machines of package classic (classic.Machine).
//
// A Sim runs n nodes in virtual time, starting at 0. Node i has the ID the
// caller gives it and runs a machine built by a Factory; it ticks every
// Config.TickInterval of virtual time, from a start phase drawn from the seed.
// After every Step, Tick and Campaign the simulator drains the machine's
// Ready: each message travels for half the round-trip time between the two
// nodes' hosts in a latency.Matrix (Config.Latency, Config.HostOf), plus an
// optional uniform jitter, and is lost with probability Config.Loss. The
// From field of every message is set by the simulator to the true sender.
//
// Faults act at the current virtual time, or at a chosen one with At:
// Crash, Restart (a fresh machine from the factory, which then campaigns),
// Partition and Heal, Cut and Recover. A message that arrives at a crashed
// node, or crosses a partition or a cut link, is dropped and the sender
// receives classic.Message{Type: classic.MsgUnreachable, From: target, To:
// sender} one round trip after it sent (a failed connection). A message lost
// at random is lost silently.
//
// All randomness comes from Config.Seed through one PCG generator, and
// events run in a fixed order: messages and actions by (time, scheduling
// sequence number) from a container/heap queue; ticks, kept apart in a ring
// sorted by time (all nodes share one interval), after the queued events of
// the same instant. So a seed replays a run exactly.
//
// The simulator counts messages (Stats) and records a compact history
// (Record): every state change of every node, every fault, and message counts
// per instant and type. The checker methods of Record replay it: TimeToElect,
// Messages, SplitBrain and FinalLeader. Sim.Agreed answers the same agreement
// question live, in O(1), for RunUntil.
//
// Typical use:
//
//	s, err := sim.New(sim.Config{
//		IDs:     ids,
//		Factory: func(i int, id classic.ID, restarted bool) classic.Machine { return newMachine(id, ids) },
//		Latency: m, // from latency.Load, or latency.Constant
//		Seed:    1,
//	})
//	if err != nil { ... }
//	s.Campaign(0)
//	s.RunUntil(sim.AllAgree, 10*time.Second)
//	s.At(s.Now()+time.Second, func(s *sim.Sim) { s.Crash(7) })
//	t0 := s.Now() + time.Second
//	s.Run(t0 + 20*time.Second)
//	rec := s.Record()
//	took, err := rec.TimeToElect(t0, nil)
//	sb, _ := rec.SplitBrain()
//	used := rec.Messages(t0, rec.End)
//
// Tests that want to assert every step use Step, which processes one event
// and describes it.
//
// The simulator copies each message's IDs list when it is sent, as the wire
// would, so a machine may keep or modify the lists it sends and receives.
// It copies the messages out of Ready before it calls the machine again, so
// a machine may reuse its outgoing slice.
//
// Costs: an event costs a heap operation (O(log pending)) and no allocation
// in the simulator once its slabs have grown; each state change updates the
// agreement tracker in O(1). Crash, Restart and Partition cost O(n).
package sim
