/*
 * WireProfile - one of the relay's format.profile values as the real runtime
 * makes it from a routed SourceRecord: the converters and how the record
 * reaches the producer.
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
 * The topic is "<prefix>.<routed topic>", or the routed topic itself when the
 * prefix is empty. A null partition leaves it to Kafka's default partitioner
 * (murmur2 of the key bytes), as both runtimes do.
 *
 * SPDX-License-Identifier: Apache-2.0
 */
package dev.outboxrelay.engine;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.connect.converters.ByteArrayConverter;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.header.Header;
import org.apache.kafka.connect.json.JsonConverter;
import org.apache.kafka.connect.source.SourceRecord;
import org.apache.kafka.connect.storage.Converter;
import org.apache.kafka.connect.storage.HeaderConverter;
import org.apache.kafka.connect.storage.SimpleHeaderConverter;
import org.apache.kafka.connect.storage.StringConverter;

public final class WireProfile {
    private final String prefix;
    private final Converter key;
    private final Converter value;
    private final Converter bytesValue; // for a BYTES payload (connect-string), else null
    private final HeaderConverter header;
    private final boolean server; // Debezium Server: no partition, no timestamp, null headers dropped

    public WireProfile(String name, String prefix) {
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

    public ProducerRecord<byte[], byte[]> convert(SourceRecord r) {
        String topic = prefix.isEmpty() ? r.topic() : prefix + "." + r.topic();
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
