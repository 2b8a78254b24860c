package cronjob

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// requeueSlack is added to every wait for the next schedule time, so that
// a sync woken a little early by clock skew still finds the time due.
const requeueSlack = 100 * time.Millisecond

// tooManyMissed is the count of missed schedule times above which the
// TooManyMissedTimes warning is recorded.
const tooManyMissed = 100

// scheduleSpec returns the schedule to parse: spec.schedule, prefixed with
// "TZ=<spec.timeZone> " when the time zone is set and loads. A schedule
// that names TZ or CRON_TZ itself is used as is and, when rec is not nil,
// warned about (UnsupportedSchedule).
func scheduleSpec(cj *batchv1.CronJob, rec record.EventRecorder) string {
	if strings.Contains(cj.Spec.Schedule, "TZ") {
		if rec != nil {
			rec.Eventf(
				cj,
				corev1.EventTypeWarning,
				"UnsupportedSchedule",
				"CRON_TZ or TZ used in schedule %q is not officially supported, see "+
					"https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details",
				cj.Spec.Schedule,
			)
		}
		return cj.Spec.Schedule
	}
	if cj.Spec.TimeZone == nil {
		return cj.Spec.Schedule
	}
	if _, err := time.LoadLocation(*cj.Spec.TimeZone); err != nil {
		return cj.Spec.Schedule
	}
	return "TZ=" + *cj.Spec.TimeZone + " " + cj.Spec.Schedule
}

// parseSchedule parses a standard five-field cron schedule (or a
// descriptor such as @hourly), with an optional TZ= or CRON_TZ= prefix.
// The parser's panics on malformed input become errors.
func parseSchedule(spec string) (s cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			s, err = nil, fmt.Errorf("invalid schedule format: %v", r)
		}
	}()
	return cron.ParseStandard(spec)
}

// missed is a count class of the schedule times that passed unmet.
type missed int

const (
	missedNone missed = iota
	missedFew
	missedMany
)

// lastDue finds, for cj at now:
//   - from: the time after which schedule times count as unmet
//     (status.lastScheduleTime, else the creation time; with withDeadline,
//     no earlier than now minus startingDeadlineSeconds);
//   - due: the latest unmet schedule time not after now, or nil;
//   - how many were missed (none, few, more than 100);
//   - an error when the schedule yields two equal consecutive times (a
//     date that never comes, such as February 31st).
//
// The count of missed times is estimated from the interval between the
// first two unmet times; the latest due time is then found by stepping the
// schedule from shortly before the estimate.
func lastDue(
	cj *batchv1.CronJob,
	now time.Time,
	s cron.Schedule,
	withDeadline bool,
) (from time.Time, due *time.Time, m missed, err error) {
	from = cj.CreationTimestamp.Time
	if cj.Status.LastScheduleTime != nil {
		from = cj.Status.LastScheduleTime.Time
	}
	if withDeadline && cj.Spec.StartingDeadlineSeconds != nil {
		if earliest := now.Add(-time.Duration(*cj.Spec.StartingDeadlineSeconds) *
			time.Second); earliest.After(from) {
			from = earliest
		}
	}
	first := s.Next(from)
	second := s.Next(first)
	if now.Before(first) {
		return from, nil, missedNone, nil
	}
	if now.Before(second) {
		return from, &first, missedNone, nil
	}
	interval := int64(second.Sub(first).Round(time.Second).Seconds())
	if interval < 1 {
		return from, nil, missedNone, fmt.Errorf(
			"time difference between two schedules is less than 1 second",
		)
	}
	count := int64(now.Sub(first).Seconds())/interval + 1
	var latest time.Time
	start := first.Add(time.Duration((count-2)*interval) * time.Second)
	for t := s.Next(start); !t.After(now); t = s.Next(t) {
		latest = t
	}
	m = missedFew
	if count > tooManyMissed {
		m = missedMany
	}
	if latest.IsZero() {
		return from, nil, m, nil
	}
	return from, &latest, m, nil
}

// untilNext is how long from now until the sync for cj's next schedule
// time (plus requeueSlack).
func untilNext(cj *batchv1.CronJob, now time.Time, s cron.Schedule) time.Duration {
	from, due, m, err := lastDue(cj, now, s, false)
	base := now
	switch {
	case err != nil:
	case due != nil:
		base = *due
	case m == missedNone:
		base = from
	}
	return s.Next(base).Add(requeueSlack).Sub(now)
}

// dueTime returns the schedule time to start a Job for now, or nil, and
// records TooManyMissedTimes when more than 100 were missed.
func dueTime(
	cj *batchv1.CronJob,
	now time.Time,
	s cron.Schedule,
	rec record.EventRecorder,
) (*time.Time, error) {
	_, due, m, err := lastDue(cj, now, s, true)
	if due == nil || due.After(now) {
		return nil, err
	}
	if m == missedMany {
		rec.Eventf(
			cj,
			corev1.EventTypeWarning,
			"TooManyMissedTimes",
			"too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew",
		)
	}
	return due, err
}
