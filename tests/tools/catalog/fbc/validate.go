package fbc

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/blang/semver/v4"
)

// Validate checks a catalog and returns every problem found, each prefixed with the ID of the
// rule it breaks (Rules lists them). The opm rules are what `opm validate` enforces when it
// loads a catalog (operator-registry alpha/declcfg), converts it to its model
// (alpha/declcfg ConvertToModel) and validates that (alpha/model Validate); the celld rules are
// the upgrade-graph rules this project adds.
func Validate(c *Catalog) []error {
	v := &validator{}
	v.run(c)
	return v.errs
}

type validator struct{ errs []error }

func (v *validator) errorf(rule Rule, format string, args ...any) {
	v.errs = append(v.errs, fmt.Errorf("[%s] %s", rule.ID, fmt.Sprintf(format, args...)))
}

// bundleInfo is what the graph checks need of a bundle.
type bundleInfo struct {
	Bundle
	version semver.Version
	valid   bool
}

func (v *validator) run(c *Catalog) {
	pkgs := map[string]Package{}
	for _, p := range c.Packages {
		switch {
		case p.Schema != SchemaPackage:
			v.errorf(RuleSchema, "package %q has schema %q, want %s", p.Name, p.Schema, SchemaPackage)
		case p.Name == "":
			v.errorf(RulePackage, "a package has no name")
		}
		if _, dup := pkgs[p.Name]; dup {
			v.errorf(RulePackage, "package %q is declared twice", p.Name)
		}
		pkgs[p.Name] = p
	}
	if len(pkgs) == 0 {
		v.errorf(RulePackage, "the catalog declares no %s", SchemaPackage)
	}

	bundles := map[string]map[string]*bundleInfo{} // package -> name -> bundle
	for _, b := range c.Bundles {
		v.checkBundle(b, pkgs, bundles)
	}

	channels := map[string]map[string]Channel{} // package -> name -> channel
	inChannel := map[string]map[string]bool{}   // package -> bundle name -> in some channel
	for _, ch := range c.Channels {
		if ch.Schema != SchemaChannel {
			v.errorf(RuleSchema, "channel %q has schema %q, want %s", ch.Name, ch.Schema, SchemaChannel)
		}
		if ch.Name == "" {
			v.errorf(RuleChannel, "package %q has a channel with no name", ch.Package)
			continue
		}
		if _, ok := pkgs[ch.Package]; !ok {
			v.errorf(RuleChannel, "channel %q belongs to package %q, which the catalog does not declare", ch.Name, ch.Package)
			continue
		}
		if channels[ch.Package] == nil {
			channels[ch.Package] = map[string]Channel{}
			inChannel[ch.Package] = map[string]bool{}
		}
		if _, dup := channels[ch.Package][ch.Name]; dup {
			v.errorf(RuleChannel, "package %q declares channel %q twice", ch.Package, ch.Name)
			continue
		}
		channels[ch.Package][ch.Name] = ch
		v.checkChannel(ch, bundles[ch.Package], inChannel[ch.Package])
	}

	for name, p := range pkgs {
		switch {
		case p.DefaultChannel == "":
			v.errorf(RuleDefaultChannel, "package %q sets no defaultChannel", name)
		case channels[name][p.DefaultChannel].Name == "":
			v.errorf(RuleDefaultChannel, "package %q: default channel %q is not one of its channels %v", name, p.DefaultChannel, keys(channels[name]))
		}
		if len(channels[name]) == 0 {
			v.errorf(RulePackageChannels, "package %q has no channel", name)
		}
		for _, bn := range sortedKeys(bundles[name]) {
			if !inChannel[name][bn] {
				v.errorf(RuleBundleInChannel, "package %q: bundle %q is in no channel", name, bn)
			}
		}
	}
}

func (v *validator) checkBundle(b Bundle, pkgs map[string]Package, bundles map[string]map[string]*bundleInfo) {
	if b.Schema != SchemaBundle {
		v.errorf(RuleSchema, "bundle %q has schema %q, want %s", b.Name, b.Schema, SchemaBundle)
	}
	if b.Name == "" {
		v.errorf(RuleBundle, "a bundle of package %q has no name", b.Package)
		return
	}
	if _, ok := pkgs[b.Package]; !ok {
		v.errorf(RuleBundle, "bundle %q belongs to package %q, which the catalog does not declare", b.Name, b.Package)
		return
	}
	if bundles[b.Package] == nil {
		bundles[b.Package] = map[string]*bundleInfo{}
	}
	if _, dup := bundles[b.Package][b.Name]; dup {
		v.errorf(RuleBundle, "package %q declares bundle %q twice", b.Package, b.Name)
		return
	}
	info := &bundleInfo{Bundle: b}
	bundles[b.Package][b.Name] = info
	if b.Image == "" {
		v.errorf(RuleBundleImage, "bundle %q has no image", b.Name)
	}
	for i, p := range b.Properties {
		if p.Type == "" {
			v.errorf(RuleProperties, "bundle %q: property %d has no type", b.Name, i)
		}
		var js json.RawMessage
		if len(p.Value) == 0 || json.Unmarshal(p.Value, &js) != nil {
			v.errorf(RuleProperties, "bundle %q: property %d (%s) has no valid JSON value", b.Name, i, p.Type)
			continue
		}
		if p.Type == PropertyGVK || p.Type == PropertyGVKRequired {
			var g GVKProperty
			if err := strictJSON(p.Value, &g); err != nil || g.Group == "" || g.Kind == "" || g.Version == "" {
				v.errorf(RuleProperties, "bundle %q: %s property %s needs group, kind and version", b.Name, p.Type, p.Value)
			}
		}
	}
	for i, ri := range b.RelatedImages {
		if ri.Image == "" {
			v.errorf(RuleRelatedImages, "bundle %q: related image %d has no image", b.Name, i)
		}
	}
	pv, err := b.PackageVersion()
	if err != nil {
		v.errorf(RulePackageProperty, "%v", err)
		return
	}
	if pv.PackageName != b.Package {
		v.errorf(RulePackageProperty, "bundle %q belongs to package %q but its %s property names %q", b.Name, b.Package, PropertyPackage, pv.PackageName)
	}
	ver, err := semver.Parse(pv.Version)
	if err != nil {
		v.errorf(RulePackageProperty, "bundle %q: version %q is not a semantic version: %v", b.Name, pv.Version, err)
		return
	}
	if want := BundleName(b.Package, ver.String()); b.Name != want {
		v.errorf(RuleBundleName, "bundle %q of version %s must be named %q", b.Name, ver, want)
	}
	for name, other := range bundles[b.Package] {
		if name != b.Name && other.valid && other.version.Equals(ver) {
			v.errorf(RuleUniqueVersions, "package %q: bundles %q and %q have the same version %s", b.Package, name, b.Name, ver)
		}
	}
	info.version, info.valid = ver, true
}

func (v *validator) checkChannel(ch Channel, bundles map[string]*bundleInfo, inChannel map[string]bool) {
	where := fmt.Sprintf("package %q, channel %q", ch.Package, ch.Name)
	if len(ch.Entries) == 0 {
		v.errorf(RuleChannelEntries, "%s has no entries", where)
		return
	}
	entries := map[string]ChannelEntry{}
	for _, e := range ch.Entries {
		if e.Name == "" {
			v.errorf(RuleChannelEntries, "%s has an entry with no name", where)
			continue
		}
		if _, dup := entries[e.Name]; dup {
			v.errorf(RuleChannelEntries, "%s lists %q twice", where, e.Name)
			continue
		}
		entries[e.Name] = e
		if bundles[e.Name] == nil {
			v.errorf(RuleChannelEntries, "%s: entry %q names no bundle of the catalog", where, e.Name)
		} else {
			inChannel[e.Name] = true
		}
		for i, s := range e.Skips {
			if s == "" {
				v.errorf(RuleSkips, "%s: entry %q: skips[%d] is empty", where, e.Name, i)
			}
		}
	}

	// Heads: entries no other entry replaces or skips (skipRange does not count, as in opm).
	incoming := map[string]bool{}
	skipped := map[string]bool{}
	for _, e := range entries {
		if e.Replaces != "" {
			incoming[e.Replaces] = true
		}
		for _, s := range e.Skips {
			incoming[s] = true
			skipped[s] = true
		}
	}
	var heads []string
	for name := range entries {
		if !incoming[name] {
			heads = append(heads, name)
		}
	}
	sort.Strings(heads)
	switch {
	case len(heads) == 0:
		v.errorf(RuleHead, "%s has no head: every entry is replaced or skipped by another", where)
		return
	case len(heads) > 1:
		v.errorf(RuleHead, "%s has %d heads (%s); exactly one entry may be left unreplaced", where, len(heads), strings.Join(heads, ", "))
		return
	}
	head := heads[0]

	// The replaces chain from the head: no cycle, and it reaches every entry not skipped.
	onChain := map[string]bool{head: true}
	path := []string{head}
	for cur := entries[head]; cur.Replaces != "" && !skipped[cur.Replaces]; {
		path = append(path, cur.Replaces)
		if onChain[cur.Replaces] {
			v.errorf(RuleCycle, "%s: the replaces chain has a cycle: %s", where, strings.Join(path, " -> "))
			return
		}
		onChain[cur.Replaces] = true
		next, ok := entries[cur.Replaces]
		if !ok {
			break // the tail may replace a version outside the channel
		}
		cur = next
	}
	var stranded []string
	for name := range entries {
		if !onChain[name] && !skipped[name] {
			stranded = append(stranded, name)
		}
	}
	if len(stranded) > 0 {
		sort.Strings(stranded)
		v.errorf(RuleStranded, "%s: stranded entries (neither on the replaces chain from %s nor skipped): %s", where, head, strings.Join(stranded, ", "))
	}

	// Edges lead to older versions, and every entry reaches the head.
	version := func(name string) (semver.Version, bool) {
		b := bundles[name]
		if b == nil || !b.valid {
			return semver.Version{}, false
		}
		return b.version, true
	}
	older := map[string][]string{} // entry -> entries it upgrades from
	for name, e := range entries {
		ver, ok := version(name)
		if !ok {
			continue
		}
		var ranges semver.Range
		if e.SkipRange != "" {
			r, err := semver.ParseRange(e.SkipRange)
			if err != nil {
				v.errorf(RuleSkipRange, "%s: entry %q: skipRange %q is not a semver range: %v", where, name, e.SkipRange, err)
			} else {
				ranges = r
				if r(ver) {
					v.errorf(RuleEdgesOlder, "%s: entry %q: skipRange %q includes its own version %s", where, name, e.SkipRange, ver)
				}
			}
		}
		edge := func(kind, to string) {
			if tv, ok := version(to); ok {
				if !tv.LT(ver) {
					v.errorf(RuleEdgesOlder, "%s: entry %q (%s) %s %q (%s), which is not older", where, name, ver, kind, to, tv)
				}
				older[name] = append(older[name], to)
			}
		}
		if e.Replaces != "" {
			edge("replaces", e.Replaces)
		}
		for _, s := range e.Skips {
			edge("skips", s)
		}
		if ranges != nil {
			for other := range entries {
				if ov, ok := version(other); ok && other != name && ranges(ov) {
					older[name] = append(older[name], other)
				}
			}
		}
	}
	reached := map[string]bool{head: true}
	queue := []string{head}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, from := range older[cur] {
			if _, in := entries[from]; in && !reached[from] {
				reached[from] = true
				queue = append(queue, from)
			}
		}
	}
	var unreached []string
	for name := range entries {
		if !reached[name] {
			unreached = append(unreached, name)
		}
	}
	if len(unreached) > 0 {
		sort.Strings(unreached)
		v.errorf(RuleConnected, "%s: the graph is not connected: no upgrade path from %s to the head %s", where, strings.Join(unreached, ", "), head)
	}
	if hv, ok := version(head); ok {
		for name := range entries {
			if ev, ok := version(name); ok && ev.GT(hv) {
				v.errorf(RuleHeadNewest, "%s: the head %s (%s) is not the newest version; %s is %s", where, head, hv, name, ev)
			}
		}
	}
}

// Head returns the one entry of a channel that no other entry replaces or skips.
func Head(ch Channel) (string, error) {
	incoming := map[string]bool{}
	for _, e := range ch.Entries {
		if e.Replaces != "" {
			incoming[e.Replaces] = true
		}
		for _, s := range e.Skips {
			incoming[s] = true
		}
	}
	var heads []string
	for _, e := range ch.Entries {
		if !incoming[e.Name] {
			heads = append(heads, e.Name)
		}
	}
	if len(heads) != 1 {
		return "", fmt.Errorf("channel %q has %d heads %v", ch.Name, len(heads), heads)
	}
	return heads[0], nil
}

func keys(m map[string]Channel) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedKeys(m map[string]*bundleInfo) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
