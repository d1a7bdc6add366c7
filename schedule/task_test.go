package schedule

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		want    []Task
		invalid bool
	}{
		{
			name: "elastic beanstalk example",
			yaml: `version: 1
cron:
 - name: "backup-job"
   url: "/backup"
   schedule: "0 */12 * * *"
 - name: "audit"
   url: "/audit?full=1"
   schedule: "@every 10m"
   description: "accepted and ignored"
`,
			want: []Task{
				{Name: "backup-job", URL: "/backup", Schedule: "0 */12 * * *"},
				{Name: "audit", URL: "/audit?full=1", Schedule: "@every 10m"},
			},
		},
		{name: "no tasks", yaml: "version: 1\ncron: []\n", want: []Task{}},
		{name: "no version", yaml: "cron: []\n", invalid: true},
		{name: "version 2", yaml: "version: 2\ncron: []\n", invalid: true},
		{name: "unknown key", yaml: "version: 1\ncron:\n - name: a\n   url: /a\n   schedule: '* * * * *'\n   method: GET\n", invalid: true},
		{name: "no name", yaml: "version: 1\ncron:\n - url: /a\n   schedule: '* * * * *'\n", invalid: true},
		{name: "absolute url", yaml: "version: 1\ncron:\n - name: a\n   url: http://evil/a\n   schedule: '* * * * *'\n", invalid: true},
		{name: "scheme-relative url", yaml: "version: 1\ncron:\n - name: a\n   url: //evil/a\n   schedule: '* * * * *'\n", invalid: true},
		{name: "six fields", yaml: "version: 1\ncron:\n - name: a\n   url: /a\n   schedule: '0 * * * * *'\n", invalid: true},
		{name: "bad schedule", yaml: "version: 1\ncron:\n - name: a\n   url: /a\n   schedule: 'often'\n", invalid: true},
		{name: "repeated name", yaml: "version: 1\ncron:\n - name: a\n   url: /a\n   schedule: '@hourly'\n - name: a\n   url: /b\n   schedule: '@daily'\n", invalid: true},
		{name: "not yaml", yaml: "version: [", invalid: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.yaml))
			if tt.invalid {
				if !errors.Is(err, ErrInvalid) {
					t.Errorf("Parse = %v, want ErrInvalid", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(Task{}), cmp.FilterPath(func(p cmp.Path) bool {
				return p.Last().String() == ".sched"
			}, cmp.Ignore())); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
			for _, task := range got {
				if task.sched == nil {
					t.Errorf("task %s: schedule not parsed", task.Name)
				}
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("version: 1\ncron:\n - name: a\n   url: /a\n   schedule: '*/5 * * * *'\n"))
	f.Add([]byte("version: 1\ncron: []\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tasks, err := Parse(data)
		if err != nil {
			return
		}
		for _, task := range tasks {
			if task.sched == nil || task.URL == "" || task.URL[0] != '/' {
				t.Errorf("accepted task %+v", task)
			}
		}
	})
}
