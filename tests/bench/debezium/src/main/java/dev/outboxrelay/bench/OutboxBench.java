/*
 * OutboxBench - the Debezium 3.6 baseline of tests/bench: the embedded engine
 * with the Postgres connector (pgoutput) and the Outbox EventRouter, producing
 * to Kafka the way Debezium Server's Kafka sink does: every record of a batch
 * is sent (topic from the router, key = aggregateid, value = the payload text,
 * the router's headers), then every send is awaited, each record is marked
 * processed and the batch finished.
 *
 * Usage: java -cp 'target/classes:target/libs/*' dev.outboxrelay.bench.OutboxBench FILE
 * FILE is a properties file: "engine.<key>" keys go to the engine/connector
 * (without the prefix), "producer.<key>" keys to the KafkaProducer. Prints
 * "BENCH streaming <epoch ms>" once the connector's streaming metrics say
 * Connected=true, and "BENCH batches B records R ack_wait_ms W" at exit.
 * SIGTERM closes the engine, then the producer.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
package dev.outboxrelay.bench;

import dev.outboxrelay.engine.EngineHost;

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.source.SourceRecord;

public final class OutboxBench {

    private OutboxBench() {
    }

    /** Debezium Server's "simplestring" format: the value's string form, UTF-8. */
    private static byte[] simpleString(Object o) {
        return o == null ? null : o.toString().getBytes(StandardCharsets.UTF_8);
    }

    /** Debezium Server's default "json" header format: a string arrives quoted. */
    private static byte[] jsonHeader(Object o) {
        if (o == null) {
            return null;
        }
        if (o instanceof CharSequence) {
            String s = o.toString().replace("\\", "\\\\").replace("\"", "\\\"");
            return ("\"" + s + "\"").getBytes(StandardCharsets.UTF_8);
        }
        return o.toString().getBytes(StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: OutboxBench PROPERTIES_FILE");
            System.exit(2);
        }
        EngineHost.Props props = EngineHost.load(args[0]);
        Properties producerProps = props.producer;
        producerProps.putIfAbsent(ProducerConfig.ACKS_CONFIG, "all");
        producerProps.putIfAbsent(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        producerProps.putIfAbsent(ProducerConfig.LINGER_MS_CONFIG, "5");
        producerProps.putIfAbsent(ProducerConfig.COMPRESSION_TYPE_CONFIG, "none");
        producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        final KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps);
        final long[] stats = new long[3]; // batches, records, ns spent waiting for acks

        // Connect format: no converters, each event's value is the SourceRecord
        // as the EventRouter left it.
        EngineHost.Handler handler = (List<ChangeEvent<SourceRecord, SourceRecord>> records,
                DebeziumEngine.RecordCommitter<ChangeEvent<SourceRecord, SourceRecord>> committer) -> {
            List<Future<RecordMetadata>> sent = new ArrayList<>(records.size());
            for (ChangeEvent<SourceRecord, SourceRecord> ev : records) {
                SourceRecord r = ev.value();
                if (r == null || r.value() == null) {
                    sent.add(null); // a tombstone: Debezium Server skips it unless told otherwise
                    continue;
                }
                RecordHeaders headers = new RecordHeaders();
                for (Header h : r.headers()) {
                    headers.add(h.key(), jsonHeader(h.value()));
                }
                sent.add(producer.send(new ProducerRecord<>(r.topic(), null, null,
                        simpleString(r.key()), simpleString(r.value()), headers)));
            }
            long w0 = System.nanoTime();
            EngineHost.awaitAndMark(sent, records, committer);
            synchronized (stats) {
                stats[0]++;
                stats[1] += records.size();
                stats[2] += System.nanoTime() - w0;
            }
        };
        int code = EngineHost.run("BENCH", props.engine, handler, stopped -> {
            producer.close();
            synchronized (stats) {
                System.out.println("BENCH batches " + stats[0] + " records " + stats[1]
                        + " ack_wait_ms " + stats[2] / 1000000);
            }
        });
        producer.close();
        System.exit(code);
    }
}
