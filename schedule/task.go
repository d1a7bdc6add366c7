package schedule

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"
)

// ErrInvalid is wrapped by the errors of Parse, ParseFile and New.
var ErrInvalid = errors.New("invalid schedule")

// Task is a periodic task of cron.yaml.
type Task struct {
	Name     string // unique; sent as X-Aws-Sqsd-Taskname
	URL      string // path (and query) on the application, starting with /
	Schedule string // cron expression, in UTC

	sched cron.Schedule
}

// file is the shape of cron.yaml.
type file struct {
	Version *int `yaml:"version"`
	Cron    []struct {
		Name        string `yaml:"name"`
		URL         string `yaml:"url"`
		Schedule    string `yaml:"schedule"`
		Description string `yaml:"description"` // accepted and ignored
	} `yaml:"cron"`
}

// ParseFile reads and parses a cron.yaml file.
func ParseFile(path string) ([]Task, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cron file: %w", err)
	}
	tasks, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tasks, nil
}

// Parse parses cron.yaml: version 1 and a list of tasks, each with a
// unique name, a url path starting with / and a schedule. Unknown keys are
// errors.
func Parse(data []byte) ([]Task, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if f.Version == nil || *f.Version != 1 {
		return nil, fmt.Errorf("%w: version must be 1", ErrInvalid)
	}
	seen := map[string]bool{}
	tasks := make([]Task, 0, len(f.Cron))
	for i, c := range f.Cron {
		t := Task{Name: c.Name, URL: c.URL, Schedule: c.Schedule}
		if err := t.parse(); err != nil {
			return nil, fmt.Errorf("%w: cron entry %d: %v", ErrInvalid, i+1, err)
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("%w: task name %q repeated", ErrInvalid, t.Name)
		}
		seen[t.Name] = true
		tasks = append(tasks, t)
	}
	return tasks, nil
}

// parse checks t and parses its schedule.
func (t *Task) parse() error {
	switch {
	case t.Name == "" || len(t.Name) > 200:
		return errors.New("name must have 1 to 200 characters")
	case strings.ContainsFunc(t.Name, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return fmt.Errorf("name %q has control characters", t.Name)
	case !strings.HasPrefix(t.URL, "/") || strings.HasPrefix(t.URL, "//"):
		return fmt.Errorf("task %q: url %q must be a path starting with /", t.Name, t.URL)
	case strings.ContainsFunc(t.URL, func(r rune) bool { return r <= 0x20 || r == 0x7f }):
		return fmt.Errorf("task %q: url %q has spaces or control characters", t.Name, t.URL)
	}
	s, err := cron.ParseStandard(t.Schedule)
	if err != nil {
		return fmt.Errorf("task %q: schedule %q: %v", t.Name, t.Schedule, err)
	}
	t.sched = s
	return nil
}
