// Package drift decides whether a live child is the operator's rendering by content, never by
// annotations, key presence or managed-fields timestamps. The rendering, merged with the live
// object's identity and the metadata others own (Merge), is sent to the API server as a dry-run
// update; the server applies its defaults and admission exactly as it would for a real write,
// and any difference between that result and the live object is drift (Diff). A verified pair
// of rendering and live content is remembered, so a settled fleet costs no request at all.
package drift
