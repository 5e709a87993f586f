package jobs

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// Durations travel in JSON as whole milliseconds (fields ending in _ms), as
// docs/json.md documents; in Go they are time.Duration.

func ms(d time.Duration) int64 { return d.Milliseconds() }

func fromMS(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

type jobMS struct {
	Runtime int64 `json:"runtime_ms"`
	Timeout int64 `json:"timeout_ms"`
	TTL     int64 `json:"ttl_ms"`
	UserCPU int64 `json:"user_cpu_ms"`
	SysCPU  int64 `json:"sys_cpu_ms"`
}

// MarshalJSON writes the job with its durations in milliseconds.
func (j Job) MarshalJSON() ([]byte, error) {
	type plain Job
	return json.Marshal(struct {
		plain
		jobMS
	}{plain(j), jobMS{ms(j.Runtime), ms(j.Timeout), ms(j.TTL), ms(j.UserCPU), ms(j.SysCPU)}})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (j *Job) UnmarshalJSON(b []byte) error {
	type plain Job
	var v struct {
		plain
		jobMS
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*j = Job(v.plain)
	j.Runtime, j.Timeout, j.TTL = fromMS(v.jobMS.Runtime), fromMS(v.jobMS.Timeout), fromMS(v.jobMS.TTL)
	j.UserCPU, j.SysCPU = fromMS(v.jobMS.UserCPU), fromMS(v.jobMS.SysCPU)
	return nil
}

// MarshalJSON writes the result with retry_in_ms in milliseconds.
func (p PollResult) MarshalJSON() ([]byte, error) {
	type plain PollResult
	return json.Marshal(struct {
		plain
		RetryIn int64 `json:"retry_in_ms"`
	}{plain(p), ms(p.RetryIn)})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (p *PollResult) UnmarshalJSON(b []byte) error {
	type plain PollResult
	var v struct {
		plain
		RetryIn int64 `json:"retry_in_ms"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*p = PollResult(v.plain)
	p.RetryIn = fromMS(v.RetryIn)
	return nil
}

type specMS struct {
	Timeout      int64 `json:"timeout_ms,omitempty"`
	TTL          int64 `json:"ttl_ms,omitempty"`
	TimeoutGrace int64 `json:"timeout_grace_ms,omitempty"`
}

// MarshalJSON writes the spec with its durations in milliseconds.
func (s Spec) MarshalJSON() ([]byte, error) {
	type plain Spec
	return json.Marshal(struct {
		plain
		specMS
	}{plain(s), specMS{ms(s.Timeout), ms(s.TTL), ms(s.TimeoutGrace)}})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *Spec) UnmarshalJSON(b []byte) error {
	type plain Spec
	var v struct {
		plain
		specMS
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*s = Spec(v.plain)
	s.Timeout, s.TTL, s.TimeoutGrace = fromMS(v.specMS.Timeout), fromMS(v.specMS.TTL), fromMS(v.specMS.TimeoutGrace)
	return nil
}

// MarshalJSON adds "output_base64", the exact bytes in standard base64,
// when the text is not valid UTF-8 (raw output of a binary program). JSON
// strings hold only UTF-8 and encoding/json would quietly turn each
// invalid byte into U+FFFD; "output" keeps that readable form.
func (o Output) MarshalJSON() ([]byte, error) {
	type plain Output // without this method
	if utf8.ValidString(o.Text) {
		return json.Marshal(plain(o))
	}
	return json.Marshal(struct {
		plain
		Base64 string `json:"output_base64"`
	}{plain(o), base64.StdEncoding.EncodeToString([]byte(o.Text))})
}

// UnmarshalJSON reads what MarshalJSON writes, taking the exact bytes from
// "output_base64" when it is there.
func (o *Output) UnmarshalJSON(b []byte) error {
	type plain Output
	var v struct {
		plain
		Base64 *string `json:"output_base64"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*o = Output(v.plain)
	if v.Base64 != nil {
		raw, err := base64.StdEncoding.DecodeString(*v.Base64)
		if err != nil {
			return fmt.Errorf("decode output_base64: %w", err)
		}
		o.Text = string(raw)
	}
	return nil
}
