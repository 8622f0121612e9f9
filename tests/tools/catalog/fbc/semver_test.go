package fbc

import (
	"reflect"
	"strings"
	"testing"
)

func tpl(t *testing.T, major, minor bool, pref string, stable ...string) *Template {
	t.Helper()
	tp := &Template{Schema: TemplateSchema, GenerateMajorChannels: major, GenerateMinorChannels: minor, DefaultChannelTypePreference: pref}
	for _, v := range stable {
		tp.Candidate.Bundles = append(tp.Candidate.Bundles, TemplateBundle{Image: "registry.test/b:" + v})
		tp.Stable.Bundles = append(tp.Stable.Bundles, TemplateBundle{Image: "registry.test/b:" + v})
	}
	if err := tp.check(); err != nil {
		t.Fatal(err)
	}
	return tp
}

// e is a channel entry of package p in the compact form of the cases below.
func e(version, replaces string, skips ...string) ChannelEntry {
	out := ChannelEntry{Name: "p.v" + version}
	if replaces != "" {
		out.Replaces = "p.v" + replaces
	}
	for _, s := range skips {
		out.Skips = append(out.Skips, "p.v"+s)
	}
	return out
}

// TestSemverChannelsAreOpms renders templates whose opm output is known (opm's semver template
// documentation and behaviour): the channel names, the edges, and the default channel.
func TestSemverChannelsAreOpms(t *testing.T) {
	versions := []string{"0.1.0", "0.1.1", "1.1.0", "1.2.1", "1.3.1-alpha", "1.3.1-beta", "1.3.1", "1.4.1-beta1", "1.4.1-beta2", "1.4.1", "2.1.0", "2.1.1", "2.3.1", "2.3.2", "3.1.0", "3.1.1"}
	major := map[string][]ChannelEntry{
		"stable-v0": {e("0.1.0", ""), e("0.1.1", "", "0.1.0")},
		"stable-v1": {e("1.1.0", ""), e("1.2.1", "1.1.0"), e("1.3.1-alpha", ""), e("1.3.1-beta", ""),
			e("1.3.1", "1.2.1", "1.1.0", "1.3.1-alpha", "1.3.1-beta"), e("1.4.1-beta1", ""), e("1.4.1-beta2", ""),
			e("1.4.1", "1.3.1", "1.1.0", "1.2.1", "1.3.1-alpha", "1.3.1-beta", "1.4.1-beta1", "1.4.1-beta2")},
		"stable-v2": {e("2.1.0", ""), e("2.1.1", "", "2.1.0"), e("2.3.1", ""), e("2.3.2", "2.1.1", "2.1.0", "2.3.1")},
		"stable-v3": {e("3.1.0", ""), e("3.1.1", "", "3.1.0")},
	}
	minor := map[string][]ChannelEntry{
		"stable-v0.1": {e("0.1.0", ""), e("0.1.1", "", "0.1.0")},
		"stable-v1.1": {e("1.1.0", "")},
		"stable-v1.2": {e("1.2.1", "1.1.0")},
		"stable-v1.3": {e("1.3.1-alpha", ""), e("1.3.1-beta", ""), e("1.3.1", "1.2.1", "1.1.0", "1.3.1-alpha", "1.3.1-beta")},
		"stable-v1.4": {e("1.4.1-beta1", ""), e("1.4.1-beta2", ""), e("1.4.1", "1.3.1", "1.1.0", "1.2.1", "1.3.1-alpha", "1.3.1-beta", "1.4.1-beta1", "1.4.1-beta2")},
		"stable-v2.1": {e("2.1.0", ""), e("2.1.1", "", "2.1.0")},
		"stable-v2.3": {e("2.3.1", ""), e("2.3.2", "2.1.1", "2.1.0", "2.3.1")},
		"stable-v3.1": {e("3.1.0", ""), e("3.1.1", "", "3.1.0")},
	}
	for _, row := range []struct {
		name         string
		major, minor bool
		pref         string
		want         map[string][]ChannelEntry
		wantDefault  string
	}{
		{name: "major channels", major: true, want: major, wantDefault: "stable-v3"},
		{name: "minor channels (opm's default)", want: minor, wantDefault: "stable-v3.1"},
		{name: "both, major preferred", major: true, minor: true, pref: StreamMajor, want: merge(major, minor), wantDefault: "stable-v3"},
		{name: "both, minor preferred", major: true, minor: true, want: merge(major, minor), wantDefault: "stable-v3.1"},
	} {
		t.Run(row.name, func(t *testing.T) {
			channels, def := semverChannels(tpl(t, row.major, row.minor, row.pref, versions...), "p")
			got := map[string][]ChannelEntry{}
			for _, ch := range channels {
				if strings.HasPrefix(ch.Name, ArchetypeStable) {
					got[ch.Name] = ch.Entries
				}
			}
			if !reflect.DeepEqual(got, row.want) {
				t.Errorf("channels:\n got %v\nwant %v", got, row.want)
			}
			if def != row.wantDefault {
				t.Errorf("default channel %s, want %s", def, row.wantDefault)
			}
		})
	}
}

func merge(a, b map[string][]ChannelEntry) map[string][]ChannelEntry {
	out := map[string][]ChannelEntry{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

// TestDefaultChannelPrefersStability: a stable channel wins over a candidate channel of a
// higher version, as in opm.
func TestDefaultChannelPrefersStability(t *testing.T) {
	tp := &Template{Schema: TemplateSchema, GenerateMajorChannels: true}
	for _, v := range []string{"0.1.0", "0.2.0", "1.0.0"} {
		tp.Candidate.Bundles = append(tp.Candidate.Bundles, TemplateBundle{Image: "registry.test/b:" + v})
	}
	tp.Stable.Bundles = []TemplateBundle{{Image: "registry.test/b:0.1.0"}}
	if err := tp.check(); err != nil {
		t.Fatal(err)
	}
	if _, def := semverChannels(tp, "p"); def != "stable-v0" {
		t.Errorf("default channel %s, want stable-v0", def)
	}
}
