package classic

import "slices"

// Floods (issue 19, finding 1). A message that asks a process for
// something (an ELECTION asks for an OK, and in the textbook for an
// election of the receiver's own) costs the receiver a send at least, and
// a member may send as many as it likes. So a machine whose algorithm
// bounds how often an honest member asks does two things:
//
//   - it holds itself to that bound (askBurst at once, then one every
//     askTicks, to each member: a request over it is not sent, as if
//     lost, which the algorithms bear), and
//   - it counts every member's requests against an allowance of its own
//     (askBurst plus slack at once, then one every askTicks/2): a request
//     over it is dropped unanswered, and its sender named in
//     Ready.Flooders, so that the driver can count it against that member
//     (the overlay strikes it, as a message its guard refuses).
//
// No honest member is named: it sends no more than its own bound, and the
// receiver allows more than that. The slack covers what the network does
// to the spacing (requests sent within one bound arrive bunched by up to
// the message deadline, a failure-detection timeout, which the receiver's
// allowance adds at the bound's rate; askSlack more for ticks out of
// phase), and the faster refill covers a driver that rebuilds its machine
// (a new machine starts with a full bound) no more than once every askTicks.
const (
	askBurst = 4
	askTicks = 4
	askSlack = 2
)

// askBudget is a token bucket per member, in ticks: credit is how many
// ticks of refill it holds, one request costs per.
type askBudget struct {
	per, max int
	credit   map[ID][2]int // member -> {credit, tick of the last update}
}

func newAskBudget(per, burst int) askBudget {
	return askBudget{per: per, max: per * burst, credit: map[ID][2]int{}}
}

// take spends one request of id's at tick now, and reports whether there
// was one.
func (a *askBudget) take(id ID, now int) bool {
	c, ok := a.credit[id]
	if !ok {
		c = [2]int{a.max, now}
	}
	c[0] = min(a.max, c[0]+now-c[1])
	c[1] = now
	ok = c[0] >= a.per
	if ok {
		c[0] -= a.per
	}
	a.credit[id] = c
	return ok
}

// asks is a machine's pair of budgets: what it may ask each member
// (own), and what each member may ask it (allowed), with the members it
// caught over their allowance since the last Ready.
type asks struct {
	own, allowed askBudget
	flooders     []ID
}

// newAsks sizes the budgets for a machine whose failure-detection timeout
// is timeout ticks (see the comment at the top of this file).
func newAsks(timeout int) asks {
	return asks{
		own:     newAskBudget(askTicks, askBurst),
		allowed: newAskBudget(askTicks/2, askBurst+timeout/askTicks+askSlack),
	}
}

// send reports whether this process may ask to at tick now.
func (a *asks) send(to ID, now int) bool { return a.own.take(to, now) }

// receive reports whether from may ask this process at tick now; if not,
// from is named among the flooders.
func (a *asks) receive(from ID, now int) bool {
	if a.allowed.take(from, now) {
		return true
	}
	if !slices.Contains(a.flooders, from) {
		a.flooders = append(a.flooders, from)
	}
	return false
}

// take returns and clears the flooders caught since the last call.
func (a *asks) take() []ID {
	f := a.flooders
	a.flooders = nil
	return f
}
