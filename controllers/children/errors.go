package children

import "fmt"

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

// conflictMessage is the sentence for an object this fleet may not adopt.
func conflictMessage(kind, ns, name, why string) string {
	return fmt.Sprintf("%s %s/%s exists and %s; the operator never adopts or changes it. Delete or rename it, or choose another fleet name", kind, ns, name, why)
}
