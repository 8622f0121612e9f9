package v1alpha1

// ExportSink selects where celld's change export goes.
// +kubebuilder:validation:Enum=Bucket;Kafka
type ExportSink string

const (
	// ExportSinkBucket writes Parquet objects under export/changes/ in the fleet bucket or in
	// bucket.name.
	ExportSinkBucket ExportSink = "Bucket"
	// ExportSinkKafka produces to a Kafka topic; it needs a celld built with export-kafka.
	ExportSinkKafka ExportSink = "Kafka"
)

// ExportSpec turns on celld's change export: every committed change to the cells' SQLite
// databases is streamed out of celld. Omitted fields keep celld's defaults. Adding, changing or
// removing export rolls the fleet one member at a time.
//
// +kubebuilder:validation:XValidation:rule="self.sink != 'Kafka' || (has(self.kafka) && !has(self.bucket))",fieldPath=".sink",reason="FieldValueInvalid",message="spec.export.sink Kafka requires spec.export.kafka and forbids spec.export.bucket; move the settings to kafka"
// +kubebuilder:validation:XValidation:rule="self.sink != 'Bucket' || !has(self.kafka)",fieldPath=".sink",reason="FieldValueInvalid",message="spec.export.sink Bucket forbids spec.export.kafka; remove kafka or set sink: Kafka"
// +kubebuilder:validation:XValidation:rule="!has(self.maxRecordBytes) || self.maxRecordBytes <= (has(self.queueBytes) ? self.queueBytes : 268435456)",fieldPath=".maxRecordBytes",reason="FieldValueInvalid",message="spec.export.maxRecordBytes must not exceed queueBytes (268435456, celld's default, when omitted); raise queueBytes or lower maxRecordBytes"
// +kubebuilder:validation:XValidation:rule="self.sink != 'Kafka' || !has(self.maxRecordBytes) || self.maxRecordBytes <= 999934464",fieldPath=".maxRecordBytes",reason="FieldValueInvalid",message="spec.export.maxRecordBytes must be at most 999934464 with sink Kafka, so a record plus 64 KiB fits Kafka's 1000000000-byte message limit; lower maxRecordBytes"
type ExportSpec struct {
	// sink is Bucket (default) or Kafka.
	// +kubebuilder:default=Bucket
	// +optional
	Sink ExportSink `json:"sink,omitempty"`
	// classes are the cell classes to export (CELLD_EXPORT_CLASSES); all when omitted. Internal
	// classes (__Queue, __Workflow, __Workflow.*) and cron classes (*.cron) cannot be exported.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=128
	// +kubebuilder:validation:items:Pattern=`^[^,\s]+$`
	// +kubebuilder:validation:XValidation:rule="self.all(c, c != '__Queue' && c != '__Workflow' && !c.startsWith('__Workflow.') && !c.endsWith('.cron'))",reason="FieldValueInvalid",message="spec.export.classes cannot name __Queue, __Workflow, __Workflow.* or *.cron classes; remove them"
	// +listType=set
	// +optional
	Classes []string `json:"classes,omitempty"`
	// excludeTables are Class.table entries never exported (CELLD_EXPORT_TABLES).
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MaxLength=256
	// +kubebuilder:validation:items:Pattern=`^[^.,\s]+\.[^.,\s]+$`
	// +listType=set
	// +optional
	ExcludeTables []string `json:"excludeTables,omitempty"`
	// maxTransactionBytes caps one exported transaction (CELLD_EXPORT_MAX_TX_BYTES).
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxTransactionBytes *int64 `json:"maxTransactionBytes,omitempty"`
	// maxRecordBytes caps one exported record (CELLD_EXPORT_MAX_RECORD_BYTES); at most
	// queueBytes (256 MiB when omitted), and at most 999934464 with the Kafka sink, whose
	// messages carry a record plus 64 KiB under Kafka's 1e9-byte limit.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxRecordBytes *int64 `json:"maxRecordBytes,omitempty"`
	// queueBytes is the in-process export queue (CELLD_EXPORT_QUEUE_BYTES, 256 MiB by default
	// in celld); size execution.memoryLimit for it.
	// +kubebuilder:validation:Minimum=1
	// +optional
	QueueBytes *int64 `json:"queueBytes,omitempty"`
	// bucket configures the Bucket sink.
	// +optional
	Bucket *ExportBucket `json:"bucket,omitempty"`
	// kafka configures the Kafka sink.
	// +optional
	Kafka *ExportKafka `json:"kafka,omitempty"`
}

// ExportBucket configures the Bucket sink.
type ExportBucket struct {
	// name is an export bucket other than the fleet bucket, on the same endpoint and
	// credentials (CELLD_EXPORT_BUCKET); the fleet's ServiceAccount must be able to write it.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9-]*[a-z0-9]$`
	// +optional
	Name string `json:"name,omitempty"`
	// flushMilliseconds is CELLD_EXPORT_FLUSH_MS.
	// +kubebuilder:validation:Minimum=1
	// +optional
	FlushMilliseconds *int64 `json:"flushMilliseconds,omitempty"`
	// flushBytes is CELLD_EXPORT_FLUSH_BYTES.
	// +kubebuilder:validation:Minimum=1
	// +optional
	FlushBytes *int64 `json:"flushBytes,omitempty"`
	// retentionDays is CELLD_EXPORT_RETENTION, 1 to 36500 days.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=36500
	// +optional
	RetentionDays *int32 `json:"retentionDays,omitempty"`
}

// ExportKafka configures the Kafka sink. Create the topic before the fleet; the sink never
// creates it.
type ExportKafka struct {
	// brokers are 1 to 16 unique host:port bootstrap brokers (CELLD_EXPORT_KAFKA_BROKERS).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=261
	// +kubebuilder:validation:items:Pattern=`^[a-zA-Z0-9]([a-zA-Z0-9.-]*[a-zA-Z0-9])?:[0-9]{1,5}$`
	// +kubebuilder:validation:XValidation:rule="self.all(b, int(b.substring(b.lastIndexOf(':') + 1)) >= 1 && int(b.substring(b.lastIndexOf(':') + 1)) <= 65535)",reason="FieldValueInvalid",message="spec.export.kafka.brokers ports must be between 1 and 65535; fix the broker address"
	// +listType=set
	// +required
	Brokers []string `json:"brokers"`
	// topic is the existing topic to produce to (CELLD_EXPORT_TOPIC).
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9._-]{1,249}$`
	// +required
	Topic string `json:"topic"`
	// retryMilliseconds is CELLD_EXPORT_RETRY_MS.
	// +kubebuilder:validation:Minimum=1
	// +optional
	RetryMilliseconds *int64 `json:"retryMilliseconds,omitempty"`
	// propertiesSecretKeyRef names the librdkafka properties key (one name=value per line).
	// The whole Secret is mounted read-only at /etc/celld/export, so a CA or client
	// certificate in the same Secret can be named there.
	// +optional
	PropertiesSecretKeyRef *SecretKeyRef `json:"propertiesSecretKeyRef,omitempty"`
	// egress adds one TCP rule on the brokers' ports to labelled broker Pods or to a cidr,
	// which may cover a whole network.
	// +required
	Egress EgressTarget `json:"egress"`
}
