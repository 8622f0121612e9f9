package celldctl

import (
	"fmt"
	"io"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/printers"
)

// Render writes the status screen: the fleet's header, the members table, then the
// reservation, routing and mesh, capacity, application, previews, the last warnings, and what
// could not be read. Every age is relative to st.Now.
func Render(w io.Writer, st *Status) error {
	tw := printers.GetNewTabWriter(w)
	p := func(format string, args ...any) { fmt.Fprintf(tw, format+"\n", args...) }

	p("Fleet:\t%s/%s (generation %d, observed %d)", st.Namespace, st.Name, st.Generation, st.ObservedGeneration)
	p("State:\t%s", stateLine(st))
	p("Profile:\t%s, %s", st.Profile, st.Layout)
	p("Image:\t%s", st.Image)
	p("Zones:\t%s (%s)", strings.Join(st.Zones, ", "), st.PlacementMode)
	c := st.Replicas
	p("Members:\tdeclared %d, desired %d, applied %d, ready %d (pods %d, joining %d, terminating %d)",
		c.Declared, c.Desired, c.Applied, c.Ready, c.Observed, c.Joining, c.Terminating)
	if st.Ready != nil {
		p("Ready:\t%s %s: %s", st.Ready.Status, st.Ready.Reason, oneLine(st.Ready.Message))
	} else {
		p("Ready:\tnot reported yet (the operator has not reconciled the fleet)")
	}
	if b := st.Blocked; b != nil {
		since := "since unknown"
		if b.Since != nil {
			since = "for " + age(*b.Since, st.Now) + ", since " + b.Since.UTC().Format("2006-01-02T15:04:05Z")
		}
		p("Blocked:\t%s %s", b.Reason, since)
	}
	if st.RestartToken != "" {
		p("Restart token:\t%s", st.RestartToken)
	}
	p("Rollout:\t%s", rolloutLine(st))
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	if err := renderMembers(w, st); err != nil {
		return err
	}
	if len(st.RemovedDisks) > 0 {
		var parts []string
		for _, d := range st.RemovedDisks {
			parts = append(parts, fmt.Sprintf("%s (%s, %s)", d.Claim, d.Phase, age(d.Created, st.Now)))
		}
		fmt.Fprintf(w, "Kept disks of removed members: %s\n", strings.Join(parts, ", "))
	}

	fmt.Fprintln(w)
	tw = printers.GetNewTabWriter(w)
	renderReservation(p, st)
	renderRouting(p, st)
	renderCapacity(p, st)
	renderApplication(p, st)
	if err := tw.Flush(); err != nil {
		return err
	}
	renderPreviews(w, st)
	renderWarnings(w, st)
	renderUnreadable(w, st)
	return nil
}

func stateLine(st *Status) string {
	switch st.State {
	case StateStopped:
		return StateStopped + " (paused, the workload scaled to 0: kubectl celld start " + st.Name + ")"
	case StatePaused:
		return StatePaused + " (spec.maintenance.paused: kubectl celld resume " + st.Name + ")"
	case StateDeleting:
		return StateDeleting + " (since " + age(*st.Deleting, st.Now) + ")"
	}
	return st.State
}

func rolloutLine(st *Status) string {
	r := st.Rollout
	if r == nil {
		return "none in progress"
	}
	if r.Note != "" {
		return r.Note
	}
	out := fmt.Sprintf("%d/%d members on the new revision", r.Updated, r.Total)
	if r.From != "" {
		out += fmt.Sprintf(" (%s -> %s)", r.From, r.To)
	} else if r.To != "" {
		out += " (" + r.To + ")"
	}
	switch {
	case r.Waiting != "":
		out += "; waiting for " + r.Waiting + " to be Ready"
		if r.Next != "" {
			out += ", then " + r.Next
		}
	case r.Next != "":
		out += "; next: " + r.Next
	case st.Layout == "Deployment":
		out += "; Kubernetes picks the next member"
	}
	if st.Paused {
		out += " (paused: Kubernetes finishes a rollout it started, the operator writes nothing)"
	}
	return out
}

func renderMembers(w io.Writer, st *Status) error {
	if len(st.Members) == 0 {
		fmt.Fprintln(w, "No members.")
		return nil
	}
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "MEMBER\tPOD\tSTATUS\tRESTARTS\tNODE\tZONE\tREVISION\tCLAIM\tCLAIM AGE\tDISK\tAPP VERSION\tLAST HEALING")
	for _, m := range st.Members {
		ord := "-"
		if m.Ordinal >= 0 {
			ord = fmt.Sprint(m.Ordinal)
		}
		status := m.Phase
		if m.Held {
			status += " [replacement hold]"
		}
		claimAge := "-"
		if m.ClaimAge != nil {
			claimAge = age(*m.ClaimAge, st.Now)
		}
		healing := "-"
		if h := m.Healing; h != nil {
			healing = h.Reason + " " + age(h.At, st.Now) + " ago"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", ord, m.Pod, status, m.Restarts,
			dash(m.Node), dash(m.Zone), dash(m.Revision), dash(m.Claim), claimAge, m.Disk, dash(m.AppVersion), healing)
	}
	return tw.Flush()
}

func renderReservation(p func(string, ...any), st *Status) {
	r := st.Reservation
	if r == nil {
		p("Reservation:\tnone")
		return
	}
	line := r.Name
	if r.Bucket != "" {
		line += ": bucket " + r.Bucket
	}
	if r.Scope != "" {
		line += ", " + r.Scope
	}
	if r.Holder != "" {
		line += ", held by " + r.Holder
	}
	if r.Note != "" {
		line += " (" + r.Note + ")"
	}
	p("Reservation:\t%s", line)
	if r.Tuning != "" {
		p("  tuning:\t%s", r.Tuning)
	}
}

func renderRouting(p func(string, ...any), st *Status) {
	r := st.Routing
	line := r.Mode
	if len(r.Hostnames) > 0 {
		line += " for " + strings.Join(r.Hostnames, ", ")
	}
	if r.Ready != nil {
		line += fmt.Sprintf(" (RoutingReady %s %s", r.Ready.Status, r.Ready.Reason)
		if r.Ready.Message != "" {
			line += ": " + oneLine(r.Ready.Message)
		}
		line += ")"
	}
	p("Routing:\t%s", line)
	if m := st.Mesh; m != nil {
		p("Mesh:\tIstio, control plane %s, application access %s, sidecars on %d/%d members",
			m.ControlPlaneNamespace, m.ApplicationAccess, m.Sidecars, m.Members)
	} else {
		p("Mesh:\tnone")
	}
}

func renderCapacity(p func(string, ...any), st *Status) {
	c := st.Capacity
	if c == nil {
		p("Capacity:\tno policy (spec.replicas is set by hand)")
		return
	}
	reason := c.Reason
	if reason == "" {
		reason = "no decision yet"
	}
	p("Capacity:\t%s: %s, desired %d (useful %d, pending %d, covered %d)", c.Mode, reason, c.Desired, c.Useful, c.Pending, c.Covered)
	if c.Message != "" {
		p("  decision:\t%s", oneLine(c.Message))
	}
	hist := fmt.Sprintf("last scale-out %s, last scale-in %s", agoText(c.LastScaleOut, st.Now), agoText(c.LastScaleIn, st.Now))
	if c.Declared != 0 {
		hist += fmt.Sprintf(", declared count accounted for %d", c.Declared)
	}
	if c.FailedBatches != 0 {
		hist += fmt.Sprintf(", %d additions that moved no load", c.FailedBatches)
	}
	if c.Baseline != "" {
		hist += ", baseline: " + c.Baseline + " " + agoText(c.BaselineAt, st.Now)
	}
	if c.Note != "" {
		hist = c.Note
	}
	p("  history:\t%s", hist)
	for _, e := range c.History {
		p("  \t%s ago %s: %s", age(e.Last, st.Now), e.Reason, oneLine(e.Note))
	}
}

func renderApplication(p func(string, ...any), st *Status) {
	a := st.Application
	if a == nil {
		p("Application:\tnot observed yet")
		return
	}
	line := ""
	if a.Converged != nil {
		line = a.Converged.Status + " " + a.Converged.Reason
	}
	if a.Version != "" {
		line += ", version " + a.Version
	}
	line += fmt.Sprintf(", %d/%d members observed", a.Observed, a.Expected)
	if len(a.Versions) > 1 {
		line += "; versions: " + strings.Join(a.Versions, ", ")
	}
	p("Application:\t%s", strings.TrimPrefix(line, ", "))
	if a.Converged != nil && a.Converged.Message != "" && a.Converged.Status != "True" {
		p("  \t%s", oneLine(a.Converged.Message))
	}
}

func renderPreviews(w io.Writer, st *Status) {
	if len(st.Previews) == 0 {
		return
	}
	fmt.Fprintln(w)
	tw := printers.GetNewTabWriter(w)
	fmt.Fprintln(tw, "PREVIEW\tPHASE\tREASON\tFLEET\tURL\tEXPIRES IN")
	for _, v := range st.Previews {
		expires := "-"
		if v.Expires != nil {
			if v.Expires.After(st.Now.Time) {
				expires = age(st.Now, *v.Expires)
			} else {
				expires = "expired"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.Name, v.Phase, dash(v.Reason), dash(v.Fleet), dash(v.URL), expires)
	}
	_ = tw.Flush()
}

func renderWarnings(w io.Writer, st *Status) {
	fmt.Fprintln(w)
	if len(st.Warnings) == 0 {
		fmt.Fprintln(w, "Warnings: none")
		return
	}
	fmt.Fprintf(w, "Warnings (last %d, newest first):\n", len(st.Warnings))
	tw := printers.GetNewTabWriter(w)
	for _, e := range st.Warnings {
		count := ""
		if e.Count > 1 {
			count = fmt.Sprintf(" (x%d)", e.Count)
		}
		fmt.Fprintf(tw, "  %s ago\t%s%s\t%s\t%s\n", age(e.Last, st.Now), e.Reason, count, e.Regarding, oneLine(e.Note))
	}
	_ = tw.Flush()
}

func renderUnreadable(w io.Writer, st *Status) {
	if len(st.Unreadable) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Could not read (the screen above lacks what these hold):")
	for _, pr := range st.Unreadable {
		fmt.Fprintf(w, "  %s: %s\n", pr.What, pr.Why)
	}
}

func age(t, now metav1.Time) string {
	if t.IsZero() {
		return "?"
	}
	d := now.Sub(t.Time)
	if d < 0 {
		d = 0
	}
	return duration.HumanDuration(d)
}

func agoText(t *metav1.Time, now metav1.Time) string {
	if t == nil {
		return "never"
	}
	return age(*t, now) + " ago"
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
