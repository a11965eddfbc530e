/*
 * OutboxCutover - Debezium 3.6.1 as a Kafka Connect worker would run it, for
 * the cutover test (tests/integration/0131-debezium-cutover.c): the embedded
 * engine with the connector configuration of a Kafka Connect connector JSON
 * ({"name": ..., "config": {...}}, the file the relay then reads with
 * --debezium-config), its records converted by the converters that JSON names
 * (dev.outboxrelay.engine.WireProfile: StringConverter is connect-string,
 * JsonConverter connect-json or connect-json-schema by schemas.enable) and
 * sent to the routed topic itself with Kafka's default partitioner, as
 * WorkerSourceTask does.
 *
 * Offsets as a standalone worker keeps them: FileOffsetBackingStore, flushed
 * every offset.flush.interval.ms. Debezium tells the slot its position
 * (flush.lsn.source=true) only when offsets are committed, so what it sent
 * after its last commit is sent again by whoever resumes from the slot.
 *
 * Usage: java -cp CLASSPATH dev.outboxrelay.cutover.OutboxCutover CONNECTOR_JSON WORKER_PROPERTIES
 * WORKER_PROPERTIES: bootstrap.servers, offset.storage.file.filename,
 * offset.flush.interval.ms, cutover.events (a file that gets "<id> <lsn>" for
 * each event before it is sent: its id header and the change's LSN from the
 * record's source offset), producer.<key> for the producer.
 * Prints "CUTOVER streaming <ms>", "CUTOVER sent N" after each acknowledged
 * batch, and "CUTOVER stopped" when SIGTERM closed the engine in time.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
package dev.outboxrelay.cutover;

import dev.outboxrelay.engine.EngineHost;
import dev.outboxrelay.engine.WireProfile;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.source.SourceRecord;

public final class OutboxCutover {

    private OutboxCutover() {
    }

    /** The profile the connector's converters make; refuses any other converter. */
    static String profile(Map<String, String> conf) {
        String k = conf.getOrDefault("key.converter", "");
        String v = conf.getOrDefault("value.converter", "");
        if (k.equals("org.apache.kafka.connect.storage.StringConverter")
                && v.equals("org.apache.kafka.connect.storage.StringConverter")) {
            return "connect-string";
        }
        if (k.equals("org.apache.kafka.connect.json.JsonConverter")
                && v.equals("org.apache.kafka.connect.json.JsonConverter")) {
            String ks = conf.getOrDefault("key.converter.schemas.enable", "true");
            String vs = conf.getOrDefault("value.converter.schemas.enable", "true");
            if (!ks.equals(vs)) {
                throw new IllegalArgumentException("key and value schemas.enable differ");
            }
            return ks.equals("true") ? "connect-json-schema" : "connect-json";
        }
        throw new IllegalArgumentException("converters " + k + " / " + v + " are not a profile");
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: OutboxCutover CONNECTOR_JSON WORKER_PROPERTIES");
            System.exit(2);
        }
        JsonNode root = new ObjectMapper().readTree(new File(args[0]));
        Map<String, String> conf = new java.util.LinkedHashMap<>();
        for (Iterator<Map.Entry<String, JsonNode>> it = root.path("config").fields(); it.hasNext();) {
            Map.Entry<String, JsonNode> e = it.next();
            conf.put(e.getKey(), e.getValue().asText());
        }
        EngineHost.Props worker = EngineHost.load(args[1]);
        WireProfile wire = new WireProfile(profile(conf), "");

        Properties engineProps = new Properties();
        for (Map.Entry<String, String> e : conf.entrySet()) {
            // Converters are the worker's business here (WireProfile), not the engine's.
            if (!e.getKey().startsWith("key.converter") && !e.getKey().startsWith("value.converter")
                    && !e.getKey().startsWith("header.converter")) {
                engineProps.setProperty(e.getKey(), e.getValue());
            }
        }
        engineProps.setProperty("name", root.path("name").asText("outbox"));
        engineProps.setProperty("offset.storage", "org.apache.kafka.connect.storage.FileOffsetBackingStore");
        for (String k : new String[] {"offset.storage.file.filename", "offset.flush.interval.ms"}) {
            String v = worker.all.getProperty(k);
            if (v == null) {
                throw new IllegalArgumentException("the worker properties need " + k);
            }
            engineProps.setProperty(k, v);
        }

        Properties producerProps = worker.producer;
        producerProps.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, worker.all.getProperty("bootstrap.servers"));
        producerProps.putIfAbsent(ProducerConfig.ACKS_CONFIG, "all");
        producerProps.putIfAbsent(ProducerConfig.LINGER_MS_CONFIG, "5");
        producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        final KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps);
        final PrintStream events = new PrintStream(
                new FileOutputStream(worker.all.getProperty("cutover.events")), false, "UTF-8");
        final long[] sentTotal = {0};

        EngineHost.Handler handler = (List<ChangeEvent<SourceRecord, SourceRecord>> records,
                DebeziumEngine.RecordCommitter<ChangeEvent<SourceRecord, SourceRecord>> committer) -> {
            // Logged before the sends: whatever reaches Kafka has its line,
            // even when the process is killed in the middle of the batch.
            StringBuilder lines = new StringBuilder();
            for (ChangeEvent<SourceRecord, SourceRecord> ev : records) {
                SourceRecord r = ev.value();
                if (r != null) {
                    Header id = r.headers().lastWithName("id");
                    lines.append(id == null ? "-" : String.valueOf(id.value())).append(' ')
                            .append(r.sourceOffset().get("lsn")).append('\n');
                }
            }
            synchronized (sentTotal) {
                events.print(lines);
                events.flush();
            }
            List<Future<RecordMetadata>> sent = new ArrayList<>(records.size());
            for (ChangeEvent<SourceRecord, SourceRecord> ev : records) {
                SourceRecord r = ev.value();
                sent.add(r == null ? null : producer.send(wire.convert(r)));
            }
            EngineHost.awaitAndMark(sent, records, committer);
            synchronized (sentTotal) {
                sentTotal[0] += records.size();
                System.out.println("CUTOVER sent " + sentTotal[0]);
                System.out.flush();
            }
        };
        int code = EngineHost.run("CUTOVER", engineProps, handler, stopped -> {
            producer.close();
            synchronized (sentTotal) {
                events.close();
                if (stopped) {
                    System.out.println("CUTOVER stopped");
                }
            }
        });
        producer.close();
        System.exit(code);
    }
}
