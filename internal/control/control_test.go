package control

import (
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/agentjobs/jobs/internal/vocab"
)

func TestGrace(t *testing.T) {
	for _, tt := range []struct {
		give, def, want time.Duration
		invalid         bool
	}{
		{give: 0, def: 0, want: DefaultGrace},
		{give: 0, def: 5 * time.Second, want: 5 * time.Second},
		{give: 300 * time.Millisecond, def: 5 * time.Second, want: 300 * time.Millisecond},
		{give: vocab.NoGrace, def: 5 * time.Second, want: 0},
		{give: -time.Second, invalid: true},
		{give: -2, invalid: true},
	} {
		got, err := Grace(tt.give, tt.def)
		if tt.invalid {
			if !errors.Is(err, vocab.ErrInvalid) {
				t.Errorf("Grace(%v) = %v, %v; want ErrInvalid", tt.give, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Grace(%v, %v) = %v, %v; want %v", tt.give, tt.def, got, err, tt.want)
		}
	}
}

func TestPlanKill(t *testing.T) {
	for _, tt := range []struct {
		sig     string
		grace   time.Duration
		want    Plan
		invalid bool
	}{
		{sig: "", want: Plan{End: true}},
		{sig: "", grace: time.Second, want: Plan{End: true, Grace: time.Second}},
		{sig: "TERM", want: Plan{End: true}},
		{sig: "sigterm", grace: time.Second, want: Plan{End: true, Grace: time.Second}},
		{sig: "15", want: Plan{End: true}},
		{sig: "KILL", want: Plan{End: true, Grace: vocab.NoGrace}},
		{sig: "SIGKILL", want: Plan{End: true, Grace: vocab.NoGrace}},
		{sig: "9", want: Plan{End: true, Grace: vocab.NoGrace}},
		{sig: "kill", grace: time.Second, want: Plan{End: true, Grace: vocab.NoGrace}},
		{sig: "INT", want: Plan{Signal: syscall.SIGINT, SignalName: "INT"}},
		{sig: "SIGCONT", want: Plan{Signal: syscall.SIGCONT, SignalName: "CONT"}},
		{sig: "18", want: Plan{Signal: syscall.SIGCONT, SignalName: "CONT"}},
		{sig: "INT", grace: time.Second, invalid: true},
		{sig: "NOPE", invalid: true},
		{sig: "", grace: -time.Second, invalid: true},
	} {
		got, err := PlanKill(tt.sig, tt.grace)
		if tt.invalid {
			if !errors.Is(err, vocab.ErrInvalid) {
				t.Errorf("PlanKill(%q, %v) = %+v, %v; want ErrInvalid", tt.sig, tt.grace, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("PlanKill(%q, %v) = %+v, %v; want %+v", tt.sig, tt.grace, got, err, tt.want)
		}
	}
}
