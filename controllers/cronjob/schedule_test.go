package cronjob

import (
	"strings"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestDueAndNext: the schedule time due now (with startingDeadlineSeconds
// applied), whether more than 100 were missed, and the wait until the next
// sync, for every-minute, hourly, time-zoned, DST-crossing and impossible
// schedules.
func TestDueAndNext(t *testing.T) {
	tests := []struct {
		name     string
		schedule string
		tz       string
		created  string
		last     string // status.lastScheduleTime
		deadline *int64
		now      string
		wantDue  string // "" none
		wantMany bool
		wantWait time.Duration
		wantErr  bool
	}{
		{
			name:     "every minute, not yet due",
			schedule: "* * * * *",
			created:  "2026-03-01T12:00:30Z",
			now:      "2026-03-01T12:00:50Z",
			wantWait: 10*time.Second + requeueSlack,
		},
		{
			name:     "every minute, due",
			schedule: "* * * * *",
			created:  "2026-03-01T12:00:30Z",
			now:      "2026-03-01T12:01:05Z",
			wantDue:  "2026-03-01T12:01:00Z",
			wantWait: 55*time.Second + requeueSlack,
		},
		{
			name:     "every minute, already scheduled",
			schedule: "* * * * *",
			created:  "2026-03-01T11:00:00Z",
			last:     "2026-03-01T12:01:00Z",
			now:      "2026-03-01T12:01:05Z",
			wantWait: 55*time.Second + requeueSlack,
		},
		{
			name:     "every minute, four missed: the latest",
			schedule: "*/1 * * * *",
			created:  "2026-03-01T11:00:00Z",
			last:     "2026-03-01T12:01:00Z",
			now:      "2026-03-01T12:05:30Z",
			wantDue:  "2026-03-01T12:05:00Z",
			wantWait: 30*time.Second + requeueSlack,
		},
		{
			name:     "hourly",
			schedule: "0 * * * *",
			created:  "2026-03-01T09:30:00Z",
			last:     "2026-03-01T11:00:00Z",
			now:      "2026-03-01T12:10:00Z",
			wantDue:  "2026-03-01T12:00:00Z",
			wantWait: 50*time.Minute + requeueSlack,
		},
		{
			name:     "daily 9:00 New York (EST, UTC-5)",
			schedule: "0 9 * * *",
			tz:       "America/New_York",
			created:  "2026-03-01T12:00:00Z",
			now:      "2026-03-01T14:05:00Z",
			wantDue:  "2026-03-01T14:00:00Z",
			wantWait: 23*time.Hour + 55*time.Minute + requeueSlack,
		},
		{
			name:     "daily 9:00 New York after the switch to EDT (UTC-4)",
			schedule: "0 9 * * *",
			tz:       "America/New_York",
			created:  "2026-03-07T15:00:00Z",
			now:      "2026-03-08T13:05:00Z",
			wantDue:  "2026-03-08T13:00:00Z",
			wantWait: 23*time.Hour + 55*time.Minute + requeueSlack,
		},
		{
			name:     "hourly across the spring-forward gap",
			schedule: "0 * * * *",
			tz:       "America/New_York",
			created:  "2026-03-08T06:30:00Z",
			last:     "2026-03-08T06:00:00Z",
			now:      "2026-03-08T06:59:00Z",
			wantWait: time.Minute + requeueSlack,
		},
		{
			name:     "more than 100 missed: the latest, flagged",
			schedule: "* * * * *",
			created:  "2026-03-01T09:00:00Z",
			now:      "2026-03-01T12:00:30Z",
			wantDue:  "2026-03-01T12:00:00Z",
			wantMany: true,
			wantWait: 30*time.Second + requeueSlack,
		},
		{
			name:     "startingDeadlineSeconds: recent enough",
			schedule: "* * * * *",
			created:  "2026-03-01T11:00:00Z",
			last:     "2026-03-01T12:00:00Z",
			deadline: ptr.To[int64](200),
			now:      "2026-03-01T12:05:30Z",
			wantDue:  "2026-03-01T12:05:00Z",
			wantWait: 30*time.Second + requeueSlack,
		},
		{
			name:     "startingDeadlineSeconds: too late for the last time",
			schedule: "0 * * * *",
			created:  "2026-03-01T09:00:00Z",
			last:     "2026-03-01T11:00:00Z",
			deadline: ptr.To[int64](10),
			now:      "2026-03-01T12:05:30Z",
			wantWait: 54*time.Minute + 30*time.Second + requeueSlack,
		},
		{
			name:     "startingDeadlineSeconds keeps many missed from being flagged",
			schedule: "* * * * *",
			created:  "2026-03-01T09:00:00Z",
			deadline: ptr.To[int64](120),
			now:      "2026-03-01T12:00:30Z",
			wantDue:  "2026-03-01T12:00:00Z",
			wantWait: 30*time.Second + requeueSlack,
		},
		{
			name:     "a date that never comes",
			schedule: "0 0 31 2 *",
			created:  "2026-03-01T09:00:00Z",
			now:      "2026-03-01T12:00:30Z",
			wantErr:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cj := cronJob(tt.schedule, at(tt.created), func(cj *batchv1.CronJob) {
				cj.Spec.StartingDeadlineSeconds = tt.deadline
				if tt.tz != "" {
					cj.Spec.TimeZone = ptr.To(tt.tz)
				}
			})
			if tt.last != "" {
				lastScheduled(at(tt.last))(cj)
			}
			s, err := parseSchedule(scheduleSpec(cj, nil))
			if err != nil {
				t.Fatal(err)
			}
			rec := record.NewFakeRecorder(10)
			now := at(tt.now)
			due, err := dueTime(cj, now, s, rec)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			switch {
			case tt.wantDue == "" && due != nil:
				t.Errorf("due %v, want none", due.UTC())
			case tt.wantDue != "" && (due == nil || !due.Equal(at(tt.wantDue))):
				t.Errorf("due %v, want %s", due, tt.wantDue)
			}
			gotMany := len(rec.Events) > 0
			if gotMany &&
				!strings.Contains(
					<-rec.Events,
					"Warning TooManyMissedTimes too many missed start times",
				) {
				t.Error("an event other than TooManyMissedTimes")
			}
			if gotMany != tt.wantMany {
				t.Errorf("TooManyMissedTimes recorded %v, want %v", gotMany, tt.wantMany)
			}
			if tt.wantErr {
				return
			}
			if tt.wantDue != "" {
				lastScheduled(*due)(cj)
			}
			if got := untilNext(cj, now, s); got != tt.wantWait {
				t.Errorf("next sync in %v, want %v", got, tt.wantWait)
			}
		})
	}
}

func TestScheduleSpec(t *testing.T) {
	tests := []struct {
		name, schedule string
		tz             *string
		want           string
		wantEvent      bool
	}{
		{"plain", "*/5 * * * *", nil, "*/5 * * * *", false},
		{
			"time zone prefixed",
			"0 9 * * *",
			ptr.To("Europe/Berlin"),
			"TZ=Europe/Berlin 0 9 * * *",
			false,
		},
		{"unknown time zone left out", "0 9 * * *", ptr.To("Mars/Olympus"), "0 9 * * *", false},
		{
			"TZ in the schedule kept and warned about",
			"CRON_TZ=UTC 0 9 * * *",
			ptr.To("Europe/Berlin"),
			"CRON_TZ=UTC 0 9 * * *",
			true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cj := cronJob(
				tt.schedule,
				epoch,
				func(cj *batchv1.CronJob) { cj.Spec.TimeZone = tt.tz },
			)
			rec := record.NewFakeRecorder(10)
			if got := scheduleSpec(cj, rec); got != tt.want {
				t.Errorf("spec %q, want %q", got, tt.want)
			}
			if got := len(rec.Events) == 1; got != tt.wantEvent {
				t.Errorf("UnsupportedSchedule recorded %v, want %v", got, tt.wantEvent)
			}
			if tt.wantEvent && !strings.HasPrefix(<-rec.Events, "Warning UnsupportedSchedule ") {
				t.Error("wrong event")
			}
		})
	}
}

func TestParseScheduleRejects(t *testing.T) {
	for _, s := range []string{"", "* * * *", "61 * * * *", "TZ=Nowhere/Never * * * * *", "@every"} {
		if _, err := parseSchedule(s); err == nil {
			t.Errorf("%q parsed", s)
		}
	}
}

func TestJobName(t *testing.T) {
	cj := cronJob("* * * * *", epoch)
	if got := jobName(cj, at("2026-03-01T12:01:00Z")); got != "cj-29539441" {
		t.Errorf("name %q", got)
	}
}
