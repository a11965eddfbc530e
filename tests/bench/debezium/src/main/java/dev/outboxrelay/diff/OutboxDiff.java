/*
 * OutboxDiff - the Debezium 3.6.1 side of the differential test
 * (tests/integration/0130-debezium-diff.c): the embedded engine with the
 * PostgreSQL connector (pgoutput) and the Outbox EventRouter, each routed
 * record written to Kafka once per wire profile, converted exactly as the
 * real runtime would convert it:
 *
 *   connect-string       Kafka Connect's WorkerSourceTask: key StringConverter,
 *                        value StringConverter (ByteArrayConverter for a bytes
 *                        payload), headers SimpleHeaderConverter (Connect's
 *                        default), topic/partition/timestamp from the record
 *   connect-json         the same with JsonConverter (schemas.enable=false)
 *                        for key and value
 *   connect-json-schema  the same with JsonConverter (schemas.enable=true)
 *   debezium-server      Debezium Server's Kafka sink with its defaults: the
 *                        engine's json key/value/header formats (JsonConverter
 *                        with its default configuration, headers included:
 *                        io.debezium.embedded.ConverterBuilder) and
 *                        ProducerRecord(topic, null, null, key, value, headers)
 *                        (KafkaChangeConsumer)
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

import io.debezium.embedded.Connect;
import io.debezium.engine.ChangeEvent;
import io.debezium.engine.DebeziumEngine;

import java.io.FileInputStream;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;

import javax.management.MBeanServer;
import javax.management.ObjectName;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.kafka.connect.converters.ByteArrayConverter;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.storage.Converter;
import org.apache.kafka.connect.storage.HeaderConverter;
import org.apache.kafka.connect.storage.SimpleHeaderConverter;
import org.apache.kafka.connect.storage.StringConverter;

public final class OutboxDiff {

    private OutboxDiff() {
    }

    /** One profile's converters and how its records reach the producer. */
    private static final class Profile {
        final String prefix;
        final Converter key;
        final Converter value;
        final Converter bytesValue; // for a BYTES payload (connect-string), else null
        final HeaderConverter header;
        final boolean server; // Debezium Server: no partition, no timestamp, null headers dropped

        Profile(String name, String prefix) {
            this.prefix = prefix;
            Map<String, Object> keyConf = new HashMap<>();
            Map<String, Object> valueConf = new HashMap<>();
            Map<String, Object> headerConf = new HashMap<>();
            switch (name) {
                case "connect-string":
                    key = new StringConverter();
                    value = new StringConverter();
                    bytesValue = new ByteArrayConverter();
                    bytesValue.configure(valueConf, false);
                    header = new SimpleHeaderConverter();
                    server = false;
                    break;
                case "connect-json":
                case "connect-json-schema":
                    keyConf.put("schemas.enable", name.equals("connect-json-schema") ? "true" : "false");
                    valueConf.putAll(keyConf);
                    key = new JsonConverter();
                    value = new JsonConverter();
                    bytesValue = null;
                    header = new SimpleHeaderConverter();
                    server = false;
                    break;
                case "debezium-server":
                    // ConverterBuilder: JsonConverter, no settings but the header type.
                    key = new JsonConverter();
                    value = new JsonConverter();
                    bytesValue = null;
                    JsonConverter h = new JsonConverter();
                    headerConf.put("converter.type", "header");
                    header = h;
                    server = true;
                    break;
                default:
                    throw new IllegalArgumentException("unknown profile " + name);
            }
            key.configure(keyConf, true);
            value.configure(valueConf, false);
            header.configure(headerConf);
        }

        ProducerRecord<byte[], byte[]> convert(SourceRecord r) {
            String topic = prefix + "." + r.topic();
            RecordHeaders headers = new RecordHeaders();
            for (Header h : r.headers()) {
                // Connect converts with the routed topic; Debezium Server with the
                // record's topic too (ConverterBuilder.toFormat).
                byte[] raw = header.fromConnectHeader(r.topic(), h.key(), h.schema(), h.value());
                if (server && raw == null) {
                    continue;
                }
                headers.add(h.key(), raw);
            }
            byte[] k = key.fromConnectData(r.topic(), headers, r.keySchema(), r.key());
            Converter vc = bytesValue != null && r.valueSchema() != null
                    && r.valueSchema().type() == Schema.Type.BYTES ? bytesValue : value;
            byte[] v = vc.fromConnectData(r.topic(), headers, r.valueSchema(), r.value());
            if (server) {
                // The engine hands over Strings (UTF-8), the sink's serializer writes them back.
                if (k != null) {
                    k = new String(k, StandardCharsets.UTF_8).getBytes(StandardCharsets.UTF_8);
                }
                if (v != null) {
                    v = new String(v, StandardCharsets.UTF_8).getBytes(StandardCharsets.UTF_8);
                }
                return new ProducerRecord<>(topic, null, null, k, v, headers);
            }
            // ConnectUtils.checkAndConvertTimestamp: null stays null, a negative one fails.
            Long ts = r.timestamp();
            return new ProducerRecord<>(topic, r.kafkaPartition(), ts, k, v, headers);
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: OutboxDiff PROPERTIES_FILE");
            System.exit(2);
        }
        Properties all = new Properties();
        try (InputStream in = new FileInputStream(args[0])) {
            all.load(in);
        }
        Properties engineProps = new Properties();
        Properties producerProps = new Properties();
        for (String k : all.stringPropertyNames()) {
            if (k.startsWith("engine.")) {
                engineProps.setProperty(k.substring(7), all.getProperty(k));
            } else if (k.startsWith("producer.")) {
                producerProps.setProperty(k.substring(9), all.getProperty(k));
            }
        }
        Map<String, Profile> profiles = new LinkedHashMap<>();
        for (String p : all.getProperty("diff.profiles", "").split(",")) {
            String[] kv = p.trim().split("=");
            if (kv.length == 2) {
                profiles.put(kv[0], new Profile(kv[0], kv[1]));
            }
        }
        producerProps.put(ProducerConfig.ACKS_CONFIG, "all");
        producerProps.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        producerProps.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        final KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps);
        final CountDownLatch done = new CountDownLatch(1);
        final int[] exitCode = {0};
        final long[] sentTotal = {0};

        DebeziumEngine<ChangeEvent<SourceRecord, SourceRecord>> engine = DebeziumEngine.create(Connect.class)
                .using(engineProps)
                .notifying((List<ChangeEvent<SourceRecord, SourceRecord>> records,
                        DebeziumEngine.RecordCommitter<ChangeEvent<SourceRecord, SourceRecord>> committer) -> {
                    List<Future<RecordMetadata>> sent = new ArrayList<>();
                    for (ChangeEvent<SourceRecord, SourceRecord> ev : records) {
                        SourceRecord r = ev.value();
                        if (r != null) {
                            for (Profile p : profiles.values()) {
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
                })
                .using((boolean success, String message, Throwable error) -> {
                    if (!success) {
                        System.err.println("DIFF engine failed: " + message);
                        if (error != null) {
                            error.printStackTrace();
                        }
                        exitCode[0] = 1;
                    }
                    done.countDown();
                })
                .build();

        ExecutorService executor = Executors.newSingleThreadExecutor();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            try {
                engine.close();
                done.await(30, TimeUnit.SECONDS);
                executor.shutdown();
                executor.awaitTermination(10, TimeUnit.SECONDS);
            } catch (Exception e) {
                e.printStackTrace();
            }
            producer.close();
            System.out.flush();
        }));
        executor.execute(engine);

        String server = engineProps.getProperty("topic.prefix", "diff");
        ObjectName metrics = new ObjectName(
                "debezium.postgres:type=connector-metrics,context=streaming,server=" + server);
        MBeanServer mbs = ManagementFactory.getPlatformMBeanServer();
        while (done.getCount() > 0) {
            try {
                if (mbs.isRegistered(metrics) && Boolean.TRUE.equals(mbs.getAttribute(metrics, "Connected"))) {
                    System.out.println("DIFF streaming");
                    System.out.flush();
                    break;
                }
            } catch (Exception e) {
                // not there yet
            }
            Thread.sleep(5);
        }
        done.await();
        producer.close();
        System.exit(exitCode[0]);
    }
}
