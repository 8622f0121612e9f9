package mutation

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"go.uber.org/zap/zapcore"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestLogWritesTheOneMutationLine: the line carries the message, the four fields and the extra
// pairs, as the operator's JSON log prints it.
func TestLogWritesTheOneMutationLine(t *testing.T) {
	var buf bytes.Buffer
	ctx := log.IntoContext(context.Background(), zap.New(zap.WriteTo(&buf), zap.UseDevMode(false), zap.Level(zapcore.InfoLevel)))
	Log(ctx, "delete", "ns/f", "Pod/f-1", "Replacing member f-1", "preview", "p")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	want := map[string]string{"msg": "mutation", "action": "delete", "fleet": "ns/f", "object": "Pod/f-1", "why": "Replacing member f-1", "preview": "p"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("%s = %v, want %q (line %s)", k, line[k], v, buf.String())
		}
	}
}
