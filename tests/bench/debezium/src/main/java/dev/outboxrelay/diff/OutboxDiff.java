/*
 * OutboxDiff - the Debezium 3.6.1 side of the differential test
 * (tests/integration/0130-debezium-diff.c): the embedded engine with the
 * PostgreSQL connector (pgoutput) and the Outbox EventRouter, each routed
 * record written to Kafka once per wire profile, converted exactly as the
 * real runtime would convert it (dev.outboxrelay.engine.WireProfile:
 * connect-string, connect-json, connect-json-schema, debezium-server).
 *
 * Each profile's topic is "<prefix>.<routed topic>", prefixes from
 * diff.profiles ("connect-string=dcs,connect-json=dcj,...").
 *
 * Usage: java -cp CLASSPATH dev.outboxrelay.diff.OutboxDiff FILE
 * FILE: "engine.<key>" to the engine, "producer.<key>" to the producer,
 * diff.profiles. Prints "DIFF streaming" once the connector streams, then
 * "DIFF sent N" after each acknowledged batch; SIGTERM closes it.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
package dev.outboxrelay.diff;

import dev.outboxrelay.engine.EngineHost;
import dev.outboxrelay.engine.WireProfile;

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.connect.source.SourceRecord;

public final class OutboxDiff {

    private OutboxDiff() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: OutboxDiff PROPERTIES_FILE");
            System.exit(2);
        }
        EngineHost.Props props = EngineHost.load(args[0]);
        Properties producerProps = props.producer;
        Map<String, WireProfile> profiles = new LinkedHashMap<>();
        for (String p : props.all.getProperty("diff.profiles", "").split(",")) {
            String[] kv = p.trim().split("=");
            if (kv.length == 2) {
                profiles.put(kv[0], new WireProfile(kv[0], kv[1]));
            }
        }
        producerProps.put(ProducerConfig.ACKS_CONFIG, "all");
        producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        final KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps);
        final long[] sentTotal = {0};

        EngineHost.Handler handler = (List<ChangeEvent<SourceRecord, SourceRecord>> records,
                DebeziumEngine.RecordCommitter<ChangeEvent<SourceRecord, SourceRecord>> committer) -> {
            List<Future<RecordMetadata>> sent = new ArrayList<>();
            for (ChangeEvent<SourceRecord, SourceRecord> ev : records) {
                SourceRecord r = ev.value();
                if (r != null) {
                    for (WireProfile p : profiles.values()) {
                        sent.add(producer.send(p.convert(r)));
                    }
                }
            }
            for (Future<RecordMetadata> f : sent) {
                try {
                    f.get();
                } catch (java.util.concurrent.ExecutionException e) {
                    throw new io.debezium.DebeziumException(e.getCause());
                }
            }
            for (ChangeEvent<SourceRecord, SourceRecord> ev : records) {
                committer.markProcessed(ev);
            }
            committer.markBatchFinished();
            synchronized (sentTotal) {
                sentTotal[0] += sent.size();
                System.out.println("DIFF sent " + sentTotal[0]);
                System.out.flush();
            }
        };
        int code = EngineHost.run("DIFF", props.engine, handler, stopped -> producer.close());
        producer.close();
        System.exit(code);
    }
}
