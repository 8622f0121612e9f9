package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "celld.eric.dev", Version: "v1alpha1"}
	// SchemeGroupVersion is GroupVersion under the name generated code (the apply
	// configurations) refers to.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers the types of this package with a runtime.Scheme. The package
	// depends on apimachinery alone, so clients import it without controller-runtime.
	SchemeBuilder = &typeRegistry{}

	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// typeRegistry collects the package's types from each file's init.
type typeRegistry struct{ types []runtime.Object }

// Register adds types to the group version.
func (r *typeRegistry) Register(objs ...runtime.Object) { r.types = append(r.types, objs...) }

// AddToScheme adds every registered type, and the group version's meta types, to s.
func (r *typeRegistry) AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, r.types...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
