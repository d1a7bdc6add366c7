package envelope

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// AttrTask is the message attribute that makes a message a firing of a
// periodic task: package schedule writes it, the worker reads it and
// pushes the message to the task's path. Its value is Task.Encode. Like
// the other attributes fairq reserves it never reaches the application as
// a user attribute; it takes the place of fairq-tenant, which a firing,
// belonging to no tenant, does not carry.
const AttrTask = "fairq-task"

// Task is a firing of a periodic task, pushed to the task's URL path with
// X-Aws-Sqsd-Taskname and X-Aws-Sqsd-Scheduled-At.
type Task struct {
	Name        string
	Path        string // URL path (and query) on the application, e.g. /cleanup
	ScheduledAt time.Time
}

type taskJSON struct {
	Name        string `json:"n"`
	Path        string `json:"p"`
	ScheduledAt int64  `json:"s"` // unix seconds
}

// Encode returns the AttrTask attribute value.
func (t Task) Encode() string {
	b, _ := json.Marshal(taskJSON{t.Name, t.Path, t.ScheduledAt.Unix()}) // cannot fail
	return string(b)
}

// errBadTask is wrapped by DecodeTask's errors.
var errBadTask = errors.New("invalid " + AttrTask)

// DecodeTask parses an AttrTask attribute value.
func DecodeTask(s string) (Task, error) {
	var j taskJSON
	if err := json.Unmarshal([]byte(s), &j); err != nil {
		return Task{}, fmt.Errorf("%w: %v", errBadTask, err)
	}
	if j.Name == "" || !strings.HasPrefix(j.Path, "/") {
		return Task{}, fmt.Errorf("%w: needs a name and a path starting with /", errBadTask)
	}
	return Task{Name: j.Name, Path: j.Path, ScheduledAt: time.Unix(j.ScheduledAt, 0).UTC()}, nil
}
