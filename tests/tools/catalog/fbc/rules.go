package fbc

// Rule is one rule Validate (or Load) enforces.
type Rule struct {
	// ID names the rule in every error that breaks it: opm/... for the rules of `opm validate`,
	// celld/... for this project's.
	ID string
	// Opm reports whether `opm validate` enforces the rule too.
	Opm bool
	// Text says what the rule requires.
	Text string
}

// The rules. Load enforces RuleSchema while it reads (opm's declcfg loader); Validate the rest.
var (
	RuleSchema          = Rule{"opm/schema", true, "every blob has a schema; olm.package, olm.channel and olm.bundle blobs decode (this loader also refuses unknown fields and schemas, which opm would keep as opaque blobs)"}
	RulePackage         = Rule{"opm/package", true, "the catalog declares its packages once each, each with a name"}
	RuleDefaultChannel  = Rule{"opm/default-channel", true, "each package sets a default channel, and it is one of the package's channels"}
	RulePackageChannels = Rule{"opm/package-channels", true, "each package has at least one channel"}
	RuleChannel         = Rule{"opm/channel", true, "each channel has a name, belongs to a declared package and is declared once"}
	RuleChannelEntries  = Rule{"opm/channel-entries", true, "each channel has entries, each named, listed once and naming a bundle of the package"}
	RuleSkips           = Rule{"opm/skips", true, "no entry skips an empty name"}
	RuleSkipRange       = Rule{"opm/skip-range", true, "each skipRange parses as a semver range"}
	RuleHead            = Rule{"opm/head", true, "each channel has exactly one head: one entry no other entry replaces or skips"}
	RuleCycle           = Rule{"opm/replaces-cycle", true, "the replaces chain from the head has no cycle"}
	RuleStranded        = Rule{"opm/stranded", true, "every entry is on the replaces chain from the head or skipped by an entry"}
	RuleBundle          = Rule{"opm/bundle", true, "each bundle has a name, belongs to a declared package and is declared once"}
	RuleBundleInChannel = Rule{"opm/bundle-in-channel", true, "every bundle is an entry of at least one channel"}
	RulePackageProperty = Rule{"opm/package-property", true, "each bundle has exactly one olm.package property, naming its own package and a semantic version"}
	RuleProperties      = Rule{"opm/properties", true, "every property has a type and a JSON value, and the well-known ones (olm.gvk, olm.gvk.required) decode"}
	RuleBundleImage     = Rule{"opm/bundle-image", true, "every bundle names its image"}
	RuleUniqueVersions  = Rule{"opm/unique-versions", true, "no two bundles of a package have the same version"}
	RuleRelatedImages   = Rule{"celld/related-images", false, "every related image names an image (opm leaves this check disabled)"}
	RuleBundleName      = Rule{"celld/bundle-name", false, "a bundle of version V is named <package>.vV, as the bundle generator names every CSV"}
	RuleEdgesOlder      = Rule{"celld/edges-older", false, "every edge (replaces, skips, skipRange) leads to an older version; no skipRange covers its own version"}
	RuleConnected       = Rule{"celld/connected", false, "every entry reaches the head through replaces, skips or skipRange, so an install of any version upgrades to the head"}
	RuleHeadNewest      = Rule{"celld/head-newest", false, "the head of each channel is its newest version"}
)

// Rules lists every rule, opm's first.
var Rules = []Rule{
	RuleSchema, RulePackage, RuleDefaultChannel, RulePackageChannels, RuleChannel, RuleChannelEntries, RuleSkips,
	RuleSkipRange, RuleHead, RuleCycle, RuleStranded, RuleBundle, RuleBundleInChannel, RulePackageProperty,
	RuleProperties, RuleBundleImage, RuleUniqueVersions,
	RuleRelatedImages, RuleBundleName, RuleEdgesOlder, RuleConnected, RuleHeadNewest,
}
