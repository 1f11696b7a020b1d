// Package record holds the Go types generated from schemas/proto/moraine/v1
// (make generate): the records every Kafka topic carries. chain.proto says
// why they are protobuf and how the files may evolve; codec reads and writes
// them, topics names the topics that carry them.
package record
