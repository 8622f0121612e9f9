package children

import (
	"fmt"
	"strings"
)

// BlockedError is a refusal the reconciler turns into a condition: Reason is one of the
// reasons in api/v1alpha1/names.go and Message is a whole sentence naming the object and the
// fix. Object is "Kind namespace/name" when one object is at fault.
type BlockedError struct {
	Reason  string
	Object  string
	Message string
}

func (e *BlockedError) Error() string {
	return fmt.Sprintf("%s: %s", e.Reason, e.Message)
}

// conflictMessage is the sentence for an object this fleet may not adopt; why is Foreign's.
func conflictMessage(kind, ns, name, why string) string {
	fix := "Delete or rename it, or choose another fleet name"
	if strings.HasPrefix(why, "has an owner reference") || strings.HasPrefix(why, "is controlled by") {
		fix = "Remove the owner reference if the object is this fleet's, otherwise delete or rename it, or choose another fleet name"
	}
	return fmt.Sprintf("%s %s/%s exists and %s; the operator never adopts or changes it. %s", kind, ns, name, why, fix)
}
