package dev.dvmirror;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.stream.Stream;
import org.apache.iceberg.ContentFile;
import org.apache.iceberg.ContentFileParser;
import org.apache.iceberg.DataFile;
import org.apache.iceberg.DeleteFile;
import org.apache.iceberg.FileFormat;
import org.apache.iceberg.FileMetadata;
import org.apache.iceberg.HasTableOperations;
import org.apache.iceberg.ManifestFile;
import org.apache.iceberg.ManifestFiles;
import org.apache.iceberg.ManifestReader;
import org.apache.iceberg.PartitionSpec;
import org.apache.iceberg.RollingManifestWriter;
import org.apache.iceberg.RowDelta;
import org.apache.iceberg.Snapshot;
import org.apache.iceberg.SnapshotSummary;
import org.apache.iceberg.StructLike;
import org.apache.iceberg.Table;
import org.apache.iceberg.TableMetadata;
import org.apache.iceberg.TableOperations;
import org.apache.iceberg.TableProperties;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.JsonNode;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.node.DoubleNode;
import org.apache.iceberg.shaded.com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.iceberg.types.Type;
import org.apache.iceberg.types.Types;
import org.apache.iceberg.util.JsonUtil;

/**
 * Content files cross py4j in one call per version instead of several round trips per file.
 *
 * <p>One line format for everything staged ({@code dv_assets/mirror/iceberg/content_file_lines.py}
 * writes it): {@code <action> TAB <content file>}, the action one of the constants below. The content
 * file is, in general, Iceberg's own {@link ContentFileParser} JSON (it starts with {@code {}), so
 * Iceberg builds its {@code DataFile}/{@code DeleteFile} objects itself exactly as it would from single
 * files. A deletion vector has only a few fields, and building it with Iceberg's own {@link
 * FileMetadata#deleteFileBuilder} costs a small fraction of parsing its JSON (a JSON tree per file, and a
 * new partition tuple whose Avro schema is converted each time), so it may come in a short form:
 *
 * <ul>
 *   <li>{@code puffin TAB <spec id> TAB <file size> TAB <path>}: the Puffin file of the DV lines that
 *       follow (the path last, so it may hold tabs);
 *   <li>{@code <action> TAB <content offset> TAB <content size> TAB <cardinality> TAB <partition JSON>
 *       TAB <referenced data file>}: one DV of that Puffin file.
 * </ul>
 *
 * The lines travel through a local file that the Python driver and its JVM (always on one machine)
 * share, streamed on both sides, rather than as one large py4j string.
 */
public final class ContentFileBatch {
  /** What to do with the content file on the rest of the line. */
  public static final String ADD_DATA = "add-data";
  public static final String REMOVE_DATA = "remove-data";
  public static final String ADD_DELETE = "add-delete";
  public static final String REMOVE_DELETE = "remove-delete";
  private static final Set<String> ACTIONS = Set.of(ADD_DATA, REMOVE_DATA, ADD_DELETE, REMOVE_DELETE);
  /** Not an action: the Puffin file the short DV lines after it are blobs of. */
  public static final String PUFFIN = "puffin";

  private ContentFileBatch() {}

  /**
   * Stages every content file listed in the local file {@code linesFile} in {@code rowDelta}, read
   * line by line (a version of 100,000 files never becomes one string on either side of py4j). Returns
   * how many were staged ({@code puffin} lines are not files).
   */
  public static int stage(RowDelta rowDelta, String linesFile, PartitionSpec spec) throws IOException {
    ObjectMapper mapper = JsonUtil.mapper();
    ShortDeletionVectors dvs = new ShortDeletionVectors(mapper, spec);
    int staged = 0;
    try (Stream<String> lines = nonEmptyLines(linesFile)) {
      for (String line : (Iterable<String>) lines::iterator) {
        int tab = line.indexOf('\t');
        if (tab < 0) {
          throw new IllegalArgumentException("content file line without an action: " + abbreviate(line));
        }
        String action = line.substring(0, tab);
        String rest = line.substring(tab + 1);
        if (action.equals(PUFFIN)) {
          dvs.puffin(rest, line);
          continue;
        }
        if (!ACTIONS.contains(action)) {
          throw new IllegalArgumentException("unknown content file action: " + abbreviate(line));
        }
        ContentFile<?> file = rest.startsWith("{") ? parse(mapper, rest, spec) : dvs.build(rest, line);
        switch (action) {
          case ADD_DATA -> rowDelta.addRows(dataFile(file, line));
          case REMOVE_DATA -> rowDelta.removeRows(dataFile(file, line));
          case ADD_DELETE -> rowDelta.addDeletes(deleteFile(file, line));
          default -> rowDelta.removeDeletes(deleteFile(file, line));
        }
        staged++;
      }
    }
    return staged;
  }

  private static DataFile dataFile(ContentFile<?> file, String line) {
    if (file instanceof DataFile data) {
      return data;
    }
    throw new IllegalArgumentException("not a data file: " + abbreviate(line));
  }

  private static DeleteFile deleteFile(ContentFile<?> file, String line) {
    if (file instanceof DeleteFile delete) {
      return delete;
    }
    throw new IllegalArgumentException("not a delete file: " + abbreviate(line));
  }

  /**
   * The DVs of the short lines: one builder for every DV (every field a DV has is set again before each
   * build, and a new builder of a partitioned spec would build a new partition tuple, its Avro schema,
   * each time), each distinct partition JSON parsed once, by {@link ContentFileParser} itself, so a
   * partition value is read exactly as on the JSON path.
   */
  private static final class ShortDeletionVectors {
    private final ObjectMapper mapper;
    private final PartitionSpec spec;
    private final Map<String, StructLike> partitions = new HashMap<>();
    private final FileMetadata.Builder builder;
    private boolean inPuffin = false;

    ShortDeletionVectors(ObjectMapper mapper, PartitionSpec spec) {
      this.mapper = mapper;
      this.spec = spec;
      this.builder =
          FileMetadata.deleteFileBuilder(spec).ofPositionDeletes().withFormat(FileFormat.PUFFIN);
    }

    /** {@code fields}: a {@code puffin} line after its first tab. */
    void puffin(String fields, String line) {
      String[] puffin = fields.split("\t", 3);
      if (puffin.length != 3 || Integer.parseInt(puffin[0]) != spec.specId()) {
        throw new IllegalArgumentException(
            "Puffin line not of partition spec " + spec.specId() + ": " + abbreviate(line));
      }
      builder.withFileSizeInBytes(Long.parseLong(puffin[1])).withPath(puffin[2]);
      inPuffin = true;
    }

    /** {@code fields}: a short DV line after its action. */
    DeleteFile build(String fields, String line) {
      String[] dv = fields.split("\t", 5);
      if (dv.length != 5 || !inPuffin) {
        throw new IllegalArgumentException("deletion vector line out of place: " + abbreviate(line));
      }
      StructLike partition = partitions.get(dv[3]);
      if (partition == null) {
        partition = parsePartition(mapper, dv[3], spec);
        partitions.put(dv[3], partition);
      }
      return builder
          .withContentOffset(Long.parseLong(dv[0]))
          .withContentSizeInBytes(Long.parseLong(dv[1]))
          .withRecordCount(Long.parseLong(dv[2]))
          .withPartition(partition)
          .withReferencedDataFile(dv[4])
          .build();
    }
  }

  /** A partition tuple as {@link ContentFileParser} reads it, from the JSON of a DV of that partition. */
  private static StructLike parsePartition(ObjectMapper mapper, String partitionJson, PartitionSpec spec) {
    String dv =
        "{\"spec-id\":"
            + spec.specId()
            + ",\"content\":\"position-deletes\",\"file-path\":\"p\",\"file-format\":\"puffin\","
            + "\"partition\":"
            + partitionJson
            + ",\"file-size-in-bytes\":0,\"record-count\":0,\"referenced-data-file\":\"d\","
            + "\"content-offset\":0,\"content-size-in-bytes\":0}";
    return parse(mapper, dv, spec).partition();
  }

  /**
   * Writes the data files listed in the local file {@code linesFile} ({@code add-data} lines of the
   * format above) straight into new manifests of {@code table} (the transaction's table: its metadata
   * folder, format version and FileIO), each closed at {@code targetSizeBytes} (at most 0: the table's
   * {@code commit.manifest.target-size-bytes}, as Iceberg's own writer), and appends them to {@code
   * rowDelta}. Neither side of py4j holds every {@code DataFile}: a 1,000,000-file version would
   * otherwise keep each one in the row delta until it writes the manifests itself at commit.
   *
   * <p>The manifests carry no snapshot id: the snapshot inherits them as they are (format 2 and up),
   * as {@code AppendFiles.appendManifest} does. Iceberg's {@code appendManifest} counts only files and
   * records into the snapshot summary; here each file is counted as {@code addRows} counts it (sizes and
   * partitions too), so the summary is the one {@code addRows} gives. Both go through two private
   * members of Iceberg's {@code MergingSnapshotProducer} (the row delta's class), reached only through
   * {@link IcebergInternals}: an Iceberg without them fails there, before any manifest is written.
   *
   * <p>Returns the manifests (their files counted by the writer). They are written now; if the commit
   * then fails, Iceberg does not delete them (an appended manifest becomes the table's only once
   * committed): the caller does.
   *
   * <p>Lines that end before {@code expectedFiles} files (a file cut short) fail here, their manifests
   * deleted, never staged as a complete version.
   */
  public static List<ManifestFile> stageDataManifests(
      RowDelta rowDelta,
      Table table,
      String linesFile,
      PartitionSpec spec,
      long targetSizeBytes,
      long expectedFiles)
      throws IOException {
    TableOperations ops = ((HasTableOperations) table).operations();
    TableMetadata current = ops.current();
    int formatVersion = current.formatVersion();
    if (formatVersion < 2) {
      throw new IllegalArgumentException("appended manifests inherit the snapshot id from format 2 on");
    }
    long targetSize =
        targetSizeBytes > 0
            ? targetSizeBytes
            : current.propertyAsLong(
                TableProperties.MANIFEST_TARGET_SIZE_BYTES,
                TableProperties.MANIFEST_TARGET_SIZE_BYTES_DEFAULT);
    Map<String, String> writerProperties = manifestWriterProperties(current);
    List<ManifestFile> appended = IcebergInternals.appendManifests(rowDelta);
    SnapshotSummary.Builder summary = IcebergInternals.addedDataFilesSummary(rowDelta);
    String prefix = "dvmirror-" + UUID.randomUUID() + "-m";
    int[] count = {0};
    RollingManifestWriter<DataFile> writer =
        new RollingManifestWriter<>(
            () ->
                ManifestFiles.write(
                    formatVersion,
                    spec,
                    table
                        .io()
                        .newOutputFile(
                            ops.metadataFileLocation(FileFormat.AVRO.addExtension(prefix + count[0]++))),
                    null,
                    writerProperties),
            targetSize);
    ObjectMapper mapper = JsonUtil.mapper();
    List<ManifestFile> manifests;
    long read = 0;
    try (Stream<String> lines = nonEmptyLines(linesFile)) {
      try {
        for (String line : (Iterable<String>) lines::iterator) {
          if (!line.startsWith(ADD_DATA + "\t{")) {
            throw new IllegalArgumentException("not an add-data JSON line: " + abbreviate(line));
          }
          DataFile dataFile = dataFile(parse(mapper, line.substring(ADD_DATA.length() + 1), spec), line);
          writer.add(dataFile);
          summary.addedFile(spec, dataFile);
          read++;
        }
        if (read != expectedFiles) {
          throw new IllegalStateException(
              "the data file lines ended after " + read + " of " + expectedFiles + " files");
        }
      } finally {
        writer.close();
      }
      manifests = writer.toManifestFiles();
    } catch (IOException | RuntimeException e) {
      for (int written = 0; written < count[0]; written++) {
        table
            .io()
            .deleteFile(ops.metadataFileLocation(FileFormat.AVRO.addExtension(prefix + written)));
      }
      throw e;
    }
    appended.addAll(manifests);
    return manifests;
  }

  /** The Avro settings Iceberg's own manifest writer takes from the table (its manifest codec). */
  private static Map<String, String> manifestWriterProperties(TableMetadata metadata) {
    Map<String, String> properties = new HashMap<>();
    properties.put(
        TableProperties.AVRO_COMPRESSION,
        metadata.property(
            TableProperties.MANIFEST_COMPRESSION, TableProperties.MANIFEST_COMPRESSION_DEFAULT));
    String level =
        metadata.property(
            TableProperties.MANIFEST_COMPRESSION_LEVEL,
            TableProperties.MANIFEST_COMPRESSION_LEVEL_DEFAULT);
    if (level != null) {
      properties.put(TableProperties.AVRO_COMPRESSION_LEVEL, level);
    }
    return properties;
  }

  /**
   * Writes the live delete files of a snapshot to the local file {@code outFile}, one {@link
   * ContentFileParser} JSON per line; returns how many.
   */
  public static int writeDeleteFiles(Table table, long snapshotId, String outFile) throws IOException {
    Snapshot snapshot = table.snapshot(snapshotId);
    if (snapshot == null) {
      throw new IllegalArgumentException("no snapshot " + snapshotId + " in " + table.name());
    }
    Map<Integer, PartitionSpec> specs = table.specs();
    int written = 0;
    try (BufferedWriter out = Files.newBufferedWriter(Path.of(outFile), StandardCharsets.UTF_8)) {
      for (ManifestFile manifest : snapshot.deleteManifests(table.io())) {
        try (ManifestReader<DeleteFile> reader =
            ManifestFiles.readDeleteManifest(manifest, table.io(), specs)) {
          for (DeleteFile file : reader) {
            out.write(ContentFileParser.toJson(file, specs.get(file.specId())));
            out.write('\n');
            written++;
          }
        }
      }
    }
    return written;
  }

  /**
   * Writes the locations of a delete manifest's live delete files to the local file {@code outFile},
   * one JSON string per line (a location may hold a line break); returns how many.
   */
  public static int writeDeleteFileLocations(Table table, ManifestFile manifest, String outFile)
      throws IOException {
    int written = 0;
    try (BufferedWriter out = Files.newBufferedWriter(Path.of(outFile), StandardCharsets.UTF_8);
        ManifestReader<DeleteFile> reader =
            ManifestFiles.readDeleteManifest(manifest, table.io(), table.specs())) {
      for (DeleteFile file : reader) {
        out.write(JsonUtil.mapper().writeValueAsString(file.location()));
        out.write('\n');
        written++;
      }
    }
    return written;
  }

  /**
   * Writes the locations of a snapshot's live data files (what Iceberg's {@code data_files} metadata
   * table lists at it) to the local file {@code outFile}, one JSON string per line; returns how many.
   */
  public static int writeDataFileLocations(Table table, long snapshotId, String outFile)
      throws IOException {
    Snapshot snapshot = table.snapshot(snapshotId);
    if (snapshot == null) {
      throw new IllegalArgumentException("no snapshot " + snapshotId + " in " + table.name());
    }
    int written = 0;
    try (BufferedWriter out = Files.newBufferedWriter(Path.of(outFile), StandardCharsets.UTF_8)) {
      for (ManifestFile manifest : snapshot.dataManifests(table.io())) {
        try (ManifestReader<DataFile> reader =
            ManifestFiles.read(manifest, table.io(), table.specs())) {
          for (DataFile file : reader) {
            out.write(JsonUtil.mapper().writeValueAsString(file.location()));
            out.write('\n');
            written++;
          }
        }
      }
    }
    return written;
  }

  /**
   * The non-empty lines of the local file {@code linesFile}, read lazily (a version of 100,000 files
   * never becomes one string on either side of py4j); close the stream when done.
   */
  private static Stream<String> nonEmptyLines(String linesFile) throws IOException {
    BufferedReader reader = Files.newBufferedReader(Path.of(linesFile), StandardCharsets.UTF_8);
    return reader
        .lines()
        .filter(line -> !line.isEmpty())
        .onClose(
            () -> {
              try {
                reader.close();
              } catch (IOException e) {
                throw new UncheckedIOException(e);
              }
            });
  }

  private static ContentFile<?> parse(ObjectMapper mapper, String json, PartitionSpec spec) {
    try {
      JsonNode node = mapper.readTree(json);
      nonFiniteFloatsAsNumbers(node.get("partition"), spec);
      return ContentFileParser.fromJson(node, spec);
    } catch (IOException e) {
      throw new UncheckedIOException("unreadable content file JSON: " + abbreviate(json), e);
    }
  }

  /**
   * A NaN or infinite float or double partition value made a number again. Iceberg's own JSON writes it
   * as a string ({@code "NaN"}, {@code "Infinity"}, {@code "-Infinity"}: Jackson's generator quotes
   * numbers JSON has no literal for) but {@code SingleValueParser} reads only numbers, so the mirror
   * writes such a value as Iceberg does and it is read here, for the partition tuple in either of
   * the forms {@code ContentFileParser} reads (an array in spec order, or an object by field id).
   */
  private static void nonFiniteFloatsAsNumbers(JsonNode partition, PartitionSpec spec) {
    if (partition == null) {
      return;
    }
    List<Types.NestedField> fields = spec.partitionType().fields();
    for (int i = 0; i < fields.size(); i++) {
      Types.NestedField field = fields.get(i);
      Type.TypeID type = field.type().typeId();
      if (type != Type.TypeID.FLOAT && type != Type.TypeID.DOUBLE) {
        continue;
      }
      if (partition instanceof ArrayNode array && i < array.size()) {
        Double number = nonFinite(array.get(i));
        if (number != null) {
          array.set(i, DoubleNode.valueOf(number));
        }
      } else if (partition instanceof ObjectNode object) {
        String key = String.valueOf(field.fieldId());
        Double number = nonFinite(object.get(key));
        if (number != null) {
          object.set(key, DoubleNode.valueOf(number));
        }
      }
    }
  }

  private static Double nonFinite(JsonNode value) {
    if (value == null || !value.isTextual()) {
      return null;
    }
    switch (value.textValue()) {
      case "NaN":
        return Double.NaN;
      case "Infinity":
        return Double.POSITIVE_INFINITY;
      case "-Infinity":
        return Double.NEGATIVE_INFINITY;
      default:
        return null;
    }
  }

  private static String abbreviate(String text) {
    return text.length() <= 200 ? text : text.substring(0, 200) + "…";
  }
}
