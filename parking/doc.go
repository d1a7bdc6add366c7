// Package parking holds the messages of paused tenants without running
// them and without spending receives on them, and lets them go within
// seconds of a resume.
//
// A worker that receives a message of a paused tenant moves it to the
// overflow queue as a parked copy (envelope.Meta.Parked), so that its
// receive count starts again; it receives that copy once more, records
// its receipt handle in the Lot and makes it invisible for a long while
// (an hour). A paused tenant's message so costs a few requests an hour
// rather than a receive every few seconds. The Waker of every worker
// looks, once a second, for tenants with parked messages that are no
// longer paused, takes their spots from the Lot (each spot is taken by
// one worker) and makes those messages visible again at once. If the Lot
// cannot be reached, or a worker holding spots in memory dies, a parked
// message comes back when its invisibility ends.
//
// Memory is the Lot of one process; Redis that of a fleet. See
// docs/architecture.md for where the worker parks and wakes.
package parking
