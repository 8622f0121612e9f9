// Package helmcharts embeds the operator's Helm charts, so the binary renders the exact chart it
// was built with and never reads charts from disk at run time.
package helmcharts

import "embed"

// FS holds every chart directory. The all: prefix keeps files starting with '_' or '.', which a
// plain directory pattern drops; without it templates/_helpers.tpl would vanish from the chart.
//
//go:embed all:celld-fleet
var FS embed.FS
