package envelope

import (
	"strings"
	"testing"
	"time"
)

// FuzzDecodeTask: a fairq-task attribute from anywhere either fails to
// decode or gives a task with a name and a path.
func FuzzDecodeTask(f *testing.F) {
	f.Add(Task{Name: "a", Path: "/a", ScheduledAt: time.Unix(1700000000, 0)}.Encode())
	f.Add(`{"n":"x","p":"http://evil/","s":1}`)
	f.Add(`{`)
	f.Fuzz(func(t *testing.T, s string) {
		task, err := DecodeTask(s)
		if err != nil {
			return
		}
		if task.Name == "" || !strings.HasPrefix(task.Path, "/") {
			t.Fatalf("decoded %+v from %q", task, s)
		}
	})
}
